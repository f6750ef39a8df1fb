"""Signed images: `sign` adds an Apptainer signature to a built image with an admin's PEM
private key; `publish --key` and `verify` check it against the matching PEM public key.

    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072 -out private.pem
    openssl pkey -in private.pem -pubout -out public.pem
    python -m builder sign cpu --key private.pem        # before the smoke tests
    python -m builder publish cpu --prefix /appl/ml --key public.pem

PEM keys rather than a PGP keyring: a key is one file the admin names, with no keyring state
in anyone's home folder and no key server. Apptainer signs every object of the SIF (the
definition, the labels, the root filesystem), so a changed byte anywhere fails the check.
The signature is added to a copy, renamed over the image: images are hard links into the
layer cache, which must not change, and a killed `sign` leaves the image as it was.
"""

import base64
import binascii
import hashlib
import os
import re
import shutil
from pathlib import Path

from .. import runner
from ..errors import RecipeError

PUBLIC_KEY = "signing-key.pem"  # the public key, published beside the image
_PUBLIC = re.compile(r"-----BEGIN PUBLIC KEY-----\s*(.*?)\s*-----END PUBLIC KEY-----", re.S)
_PRIVATE = re.compile(r"-----BEGIN (RSA |EC |ENCRYPTED )?PRIVATE KEY-----")
MAKE_PUBLIC = "openssl pkey -in private.pem -pubout -out public.pem"
VERIFY_TIMEOUT_S = 900  # hashing a 15 GB image; seconds for the CPU image


def fingerprint(public_key: Path) -> str:
    """`SHA256:<hex>` of the key's DER form, as `openssl pkey -pubin -in KEY -outform DER |
    sha256sum` prints it; a file that is not a PEM public key is one line, exit 2."""
    text = _read(public_key)
    found = _PUBLIC.search(text)
    if found is None:
        hint = "a private key; give its public half, made with: " if _PRIVATE.search(text) else "made with: "
        raise RecipeError(
            f"not a PEM public key (-----BEGIN PUBLIC KEY-----); expected {hint}{MAKE_PUBLIC}", file=str(public_key)
        )
    try:
        der = base64.b64decode("".join(found.group(1).split()), validate=True)
    except binascii.Error:
        raise RecipeError(
            "a PEM public key whose body is not base64; expected the file openssl wrote", file=str(public_key)
        ) from None
    return "SHA256:" + hashlib.sha256(der).hexdigest()


def check_private(private_key: Path):
    """One line, exit 2, unless the file is a PEM private key (Apptainer reads it at `sign`)."""
    if not _PRIVATE.search(_read(private_key)):
        raise RecipeError(
            "not a PEM private key (-----BEGIN PRIVATE KEY-----); expected one such as "
            "`openssl genpkey -algorithm RSA -out private.pem` writes",
            file=str(private_key),
        )


def check_signature(apptainer, image: Path, public_key: Path):
    """One line, exit 2, unless every object of ``image`` carries a signature that verifies
    against ``public_key``: unsigned, signed with another key, or changed since."""
    result = runner.run(
        [apptainer, "verify", "--key", str(public_key), str(image)], check=False, timeout=VERIFY_TIMEOUT_S
    )
    if result.returncode != 0:
        reason = _fatal_line(result.stderr) or f"apptainer verify exit status {result.returncode}"
        raise RecipeError(
            f"the image's signature does not verify against {public_key} ({fingerprint(public_key)}): {reason}",
            file=str(image),
        )


def sign_in_place(apptainer, image: Path, private_key: Path, scratch: Path):
    """Sign a copy of ``image`` in ``scratch`` (on its filesystem) and rename it over the image."""
    copy = scratch / f".{image.name}.signing-{os.getpid()}"
    try:
        shutil.copyfile(image, copy)
        result = runner.run(
            [apptainer, "sign", "--key", str(private_key), str(copy)], check=False, timeout=VERIFY_TIMEOUT_S
        )
        if result.returncode != 0:
            reason = _fatal_line(result.stderr) or f"exit status {result.returncode}"
            raise RecipeError(f"apptainer sign refused the key: {reason}", file=str(private_key))
        os.replace(copy, image)
    finally:
        copy.unlink(missing_ok=True)


def _fatal_line(stderr: str) -> str:
    """Apptainer's reason, from its last FATAL line, without the prefix."""
    lines = [line.split(":", 1)[1].strip() for line in stderr.splitlines() if line.startswith("FATAL:")]
    return lines[-1] if lines else ""


def _read(path: Path) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError as error:
        raise RecipeError(f"cannot read the key ({error.strerror}); expected a PEM key file", file=str(path)) from None
