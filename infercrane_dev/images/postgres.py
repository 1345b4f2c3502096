"""PostgreSQL as a Pod, for the runner's shared state inside a test cluster: Debian 12's
``postgresql-15`` and the libraries it links (pinned ``.deb`` files, :mod:`.debian`), the C
time zone only, as ``65532:65532`` (``postgres``). Dev only, never shipped.

A Pod runs ``initdb`` (an init container, into an empty volume) and then ``postgres``, each with
its own arguments (``tests/conformance/statepod.py``). The image has Debian's ``/bin/sh``
(dash) because ``initdb`` starts the server through ``popen``, which runs a shell.
"""

from __future__ import annotations

from pathlib import Path

from . import debian
from .build import BuiltImage, Sources, build_image
from .catalog import ACCOUNT_ID, PATH_ENV, ROOTFS, Directory, ImageSpec, Layer, Packaged, account
from .debs import fetch

REPOSITORY = "infercrane.local/infercrane/postgres"
VERSION = "15"
BIN = f"/usr/lib/postgresql/{VERSION}/bin"
DATA = "/var/lib/postgresql"
# What postgres, initdb and their modules link (readelf NEEDED, closed over, mapped by dpkg -S).
_LIBRARIES = (
    *("libaudit1", "libcap-ng0", "libcap2", "libcom-err2", "libffi8", "libgcc-s1"),
    *("libgcrypt20", "libgmp10", "libgnutls30", "libgpg-error0", "libgssapi-krb5-2"),
    *("libhogweed6", "libicu72", "libidn2-0", "libk5crypto3", "libkeyutils1", "libkrb5-3"),
    *("libkrb5support0", "libldap-2.5-0", "liblz4-1", "liblzma5", "libnettle8", "libp11-kit0"),
    *("libpam0g", "libpq5", "libsasl2-2", "libssl3", "libstdc++6", "libsystemd0"),
    *("libtasn1-6", "libunistring2", "libxml2", "libzstd1", "zlib1g"),
)
DEBS = debian.pins(("libc6", *_LIBRARIES, "postgresql-15", "tzdata", "dash"))
_DIRECTORIES = (
    "usr/share",
    "usr/share/zoneinfo",
    "usr/share/zoneinfo/Etc",
    "usr/share/postgresql",
    f"usr/share/postgresql/{VERSION}",
    "usr/lib/postgresql",
    f"usr/lib/postgresql/{VERSION}",
    f"usr/lib/postgresql/{VERSION}/bin",
    f"usr/lib/postgresql/{VERSION}/lib",
    "bin",
    "var",
    "var/lib",
)
SERVER = Layer(
    (
        *debian.libraries(_LIBRARIES),
        *(Directory(path) for path in _DIRECTORIES),
        Packaged(
            "postgresql-15",
            (
                f"{BIN}/postgres",
                f"{BIN}/initdb",
                f"/usr/lib/postgresql/{VERSION}/lib/*.so",
                f"/usr/share/postgresql/{VERSION}/*",
            ),
        ),
        Packaged("tzdata", ("/usr/share/zoneinfo/Etc/UTC", "/usr/share/zoneinfo/UTC")),
        Packaged("dash", ("/bin/dash", "/bin/sh")),
    )
)
SPEC = ImageSpec(
    "postgres",
    (ROOTFS, account("postgres", DATA.lstrip("/")), SERVER),
    (f"{BIN}/postgres",),
    env=(PATH_ENV, "TZ=UTC"),
    user=f"{ACCOUNT_ID}:{ACCOUNT_ID}",
)


def build_postgres(bin_dir: Path, *, out_dir: Path, deb_cache: Path) -> BuiltImage:
    """``<out_dir>/postgres.oci.tar``, tagged with the packaged version."""
    sources = Sources(bin_dir, fetch(DEBS, deb_cache))
    [pin] = debian.pins(("postgresql-15",))
    return build_image(
        SPEC, sources, name=REPOSITORY, tag=pin.version.replace("+", "_"), out_dir=out_dir
    )
