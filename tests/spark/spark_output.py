"""What spark-submit, yarn and a Kubernetes driver print, as Spark 4 and Hadoop 3 print it
(the message texts are those of the classes in pyspark's own jars), for the tests that
read it without a cluster."""

APP = "application_1763900000000_0042"
POD = "spark:daily-totals-7-3f9a1c2b4d-driver"
K8S = "k8s://https://kube.example.com:6443"


YARN_FAILED = f"""\
26/11/23 19:20:01 INFO Client: Requesting a new application from cluster with 3 NodeManagers
26/11/23 19:20:02 INFO Client: Submitting application {APP} to ResourceManager
26/11/23 19:20:02 INFO YarnClientImpl: Submitted application {APP}
26/11/23 19:20:03 INFO Client: Application report for {APP} (state: ACCEPTED)
26/11/23 19:20:03 INFO Client: 
\t client token: N/A
\t diagnostics: AM container is launched, waiting for AM container to Register with RM
\t ApplicationMaster host: N/A
\t ApplicationMaster RPC port: -1
\t queue: etl
\t start time: 1763925602000
\t final status: UNDEFINED
\t tracking URL: http://rm.example.com:8088/proxy/{APP}/
\t user: etl
26/11/23 19:20:09 INFO Client: Application report for {APP} (state: RUNNING)
26/11/23 19:21:14 INFO Client: Application report for {APP} (state: FINISHED)
26/11/23 19:21:14 INFO Client: 
\t client token: N/A
\t diagnostics: User application exited with status 1
\t ApplicationMaster host: node-3.example.com
\t final status: FAILED
\t tracking URL: http://rm.example.com:8088/proxy/{APP}/
Exception in thread "main" org.apache.spark.SparkException: Application {APP} finished with failed status
"""  # noqa: W291

K8S_FAILED = f"""\
26/11/23 19:30:00 INFO KerberosConfDriverFeatureStep: You have not specified a krb5.conf file locally or via a ConfigMap.
26/11/23 19:30:02 INFO LoggingPodStatusWatcherImpl: State changed, new state: 
\t pod name: daily-totals-7-3f9a1c2b4d-driver
\t namespace: spark
\t labels: spark-app-name -> daily-totals-7, spark-app-selector -> spark-5e2f0c9d8a7b4c3e, spark-role -> driver
\t pod uid: 5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a
\t phase: Pending
26/11/23 19:30:02 INFO Client: Deployed Spark application daily-totals-7 with application ID spark-5e2f0c9d8a7b4c3e and submission ID {POD} into Kubernetes
26/11/23 19:30:03 INFO LoggingPodStatusWatcherImpl: Waiting for application daily-totals-7 with application ID spark-5e2f0c9d8a7b4c3e and submission ID {POD} to finish...
26/11/23 19:30:04 INFO LoggingPodStatusWatcherImpl: Application status for spark-5e2f0c9d8a7b4c3e (phase: Running)
26/11/23 19:31:10 INFO LoggingPodStatusWatcherImpl: State changed, new state: 
\t pod name: daily-totals-7-3f9a1c2b4d-driver
\t phase: Failed
26/11/23 19:31:10 INFO LoggingPodStatusWatcherImpl: Container final statuses:


\t container name: spark-kubernetes-driver
\t container image: registry.example.com/spark-py:4.0.1
\t container state: terminated
\t container started at: 2026-11-23T19:30:05Z
\t container finished at: 2026-11-23T19:31:09Z
\t exit code: 3
\t termination reason: Error
26/11/23 19:31:10 INFO LoggingPodStatusWatcherImpl: Application daily-totals-7 with application ID spark-5e2f0c9d8a7b4c3e and submission ID {POD} finished
"""  # noqa: W291

STANDALONE_CLIENT = """\
26/11/23 19:01:12 INFO SparkContext: Submitted application: daily 7
26/11/23 19:01:15 INFO StandaloneSchedulerBackend: Connected to Spark cluster with app ID app-20261123190115-0003
26/11/23 19:01:15 INFO StandaloneAppClient$ClientEndpoint: Executor added: app-20261123190115-0003/0 on worker-1
"""


YARN_STATUS = f"""\
Application Report : 
\tApplication-Id : {APP}
\tApplication-Name : daily 2026-11-23
\tApplication-Type : SPARK
\tUser : etl
\tQueue : etl
\tStart-Time : 1763925602000
\tFinish-Time : {{finish}}
\tProgress : 100%
\tState : {{state}}
\tFinal-State : {{final}}
\tTracking-URL : http://rm.example.com:8088/proxy/{APP}/
\tLog Aggregation Status : SUCCEEDED
\tDiagnostics : 
"""  # noqa: W291

K8S_STATUS = f"""\
Application status (driver): 
\t pod name: {POD.split(":")[1]}
\t namespace: spark
\t phase: {{phase}}
\t container status: 
\t\t container name: spark-kubernetes-driver
\t\t container state: {{container}}
{{code}}"""  # noqa: W291
