-- The source table of the migration example: :shards shards of :rows orders each.
-- The same values as make_source.py writes for the embedded source.
DROP TABLE IF EXISTS orders;
CREATE TABLE orders (
    order_id   bigint PRIMARY KEY,
    shard      integer NOT NULL,
    customer   text NOT NULL,
    amount     numeric(10, 2) NOT NULL,
    ordered_at timestamp NOT NULL
);
INSERT INTO orders
SELECT id,
       (id - 1) % :shards + 1,
       'customer-' || id % 97,
       round(((id * 37) % 10000) / 100.0, 2),
       timestamp '2024-02-01 12:00:00' + ((id * 7) % 28) * interval '1 day'
FROM generate_series(1, :shards * :rows) AS id;
CREATE INDEX orders_shard ON orders (shard);  -- each extract reads one shard through it
ANALYZE orders;
