"""``utility crypt``: encrypt or decrypt a text with the passkey."""

from __future__ import annotations

import argparse

from .. import crypto
from ..errors import PasskeyMissing, UsageError
from . import say, seed_passkey_given
from .commands import command


def _crypt_arguments(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("-e", dest="encrypt", action="store_true", help="encrypt TEXT")
    mode.add_argument("-d", dest="decrypt", action="store_true", help="decrypt TEXT")
    parser.add_argument(
        "--seed-format", action="store_true", help="encrypt in the seed's (Java) format"
    )
    parser.add_argument("words", nargs="+", metavar="TEXT")


@command("crypt", "encrypt (-e) or decrypt (-d) a text with the passkey", _crypt_arguments)
def crypt(options: argparse.Namespace) -> int:
    words = options.words
    passkey = crypto.read_passkey()
    if len(words) == 2 and passkey is not None:  # which one is the passkey?
        raise UsageError(
            "crypt takes one TEXT (quote it) when PASSKEY or PASSKEY_FILE is set; the seed's "
            "'crypt -e PASSKEY TEXT' is for when neither is"
        )
    if len(words) == 2:  # the seed's form: crypt -e PASSKEY TEXT
        seed_passkey_given(words[0])
        passkey, words = words[0], words[1:]
    if len(words) != 1:
        raise UsageError("usage: utility crypt -e|-d TEXT")
    if passkey is None:
        raise PasskeyMissing("crypt")
    if options.encrypt:
        say(crypto.encrypt(words[0], passkey, seed_format=options.seed_format))
    else:
        say(crypto.decrypt(words[0], passkey))
    return 0
