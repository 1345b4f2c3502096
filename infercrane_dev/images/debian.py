"""Debian 12's packages the images are made of: each pinned once (name, version, the ``.deb``'s
sha256, :mod:`.debs`), and, for a library package, where its files go.

The pins are the versions bookworm and bookworm-security served on the day they were taken;
Debian's mirror keeps only the newest of each, so a pin that is gone fails the build in one
line (``debs.fetch``), to be replaced by the version ``apt-get download <name>`` gets.
"""

from __future__ import annotations

from .catalog import Directory, Entry, Packaged
from .debs import DebPin

_LIB, _USR_LIB = "/lib/x86_64-linux-gnu/*", "/usr/lib/x86_64-linux-gnu/*"
_DIRECTORIES = ("lib", "lib/x86_64-linux-gnu", "lib64", "usr/lib", "usr/lib/x86_64-linux-gnu")
PINS: dict[str, DebPin] = {}
# A library package's directories: all it puts there (OpenSSL's engines and providers too).
_LIBRARY_FILES: dict[str, tuple[str, ...]] = {}


def _pin(
    name: str, version: str, sha256: str, libraries: tuple[str, ...] = (), arch: str = "amd64"
) -> None:
    PINS[name] = DebPin(name, version, sha256, arch)
    if libraries:
        _LIBRARY_FILES[name] = libraries


# The runner's init (PID 1): it reaps the processes a run's engine leaves to it.
_pin("tini", "0.19.0-1+b3", "7d1947665fa40e55f218fefad773dc6de66458d0b39eaa292cdcadfc7c996632")
_pin("dash", "0.5.12-2", "33ea40061da2f1a861ec46212b2b6a34f0776a049b1a3f0abce2fb8cb994258f")
_pin(
    "libaudit1",
    "1:3.0.9-1",
    "30954df4b5a7c505661ba8ae5e6ea94f5805e408899fb400783bb166eb5ff306",
    (_LIB,),
)
_pin(
    "libbz2-1.0",
    "1.0.8-5+b1",
    "54149da3f44b22d523b26b692033b84503d822cc5122fed606ea69cc83ca5aeb",
    (_LIB,),
)
_pin("libc6", "2.36-9+deb12u14", "ba4f88f73dbc3ae9055f3c20f4523bfdbaf1ad13ff95e258924f77d20b4fbedf")
_pin(
    "libcap-ng0",
    "0.8.3-1+b3",
    "b4b54769c77e4a71c8b33aee4d600ba28a9994a1c6f60d55d4ebe7fc44882e07",
    (_LIB,),
)
_pin(
    "libcap2",
    "1:2.66-4+deb12u3+b1",
    "8d684c673e7483802a5c447834b0df6fce006eb3a7109e1be412f5ad425bb24f",
    (_LIB,),
)
_pin(
    "libcom-err2",
    "1.47.0-2+b2",
    "a2bac7015e78fbc0c504df3e441f3a22292f1d2d77f9ccda760057f3690e22f2",
    (_LIB,),
)
_pin(
    "libcrypt1",
    "1:4.4.33-2",
    "f5f60a5cdfd4e4eaa9438ade5078a57741a7a78d659fcb0c701204f523e8bd29",
    (_LIB,),
)
_pin(
    "libexpat1",
    "2.5.0-1+deb12u5",
    "cae5ded666d8573dd33060bc66fbac21eea8b101a6b56e2af8bd590fcfa65d79",
    (_LIB, _USR_LIB),
)
_pin(
    "libffi8",
    "3.4.4-1",
    "6d9f6c25c30efccce6d4bceaa48ea86c329a3432abb360a141f76ac223a4c34a",
    (_USR_LIB,),
)
_pin(
    "libgcc-s1",
    "12.2.0-14+deb12u1",
    "3016e62cb4b7cd8038822870601f5ed131befe942774d0f745622cc77d8a88f7",
    (_LIB,),
)
_pin(
    "libgcrypt20",
    "1.10.1-3+deb12u1",
    "e7a56552139c693904a6f9712234c05fe918353273a7cbdb5e62f423ad71bb97",
    (_USR_LIB,),
)
_pin(
    "libgmp10",
    "2:6.2.1+dfsg1-1.1",
    "187aedef2ed763f425c1e523753b9719677633c7eede660401739e9c893482bd",
    (_USR_LIB,),
)
_pin(
    "libgnutls30",
    "3.7.9-2+deb12u7",
    "30abec8c824feb1d2d7e9000a34083cccd19d139625e1b21547e3ac53b922f8e",
    (_USR_LIB,),
)
_pin(
    "libgpg-error0",
    "1.46-1",
    "89944ee11d7370ce6ef46fc52f094c4a6512eff8943ec4c6ebefeae6360ceada",
    (_LIB,),
)
_pin(
    "libgssapi-krb5-2",
    "1.20.1-2+deb12u5",
    "d8b87aea91b956b416c01a28c44ff6228315ae3b73de40acddac3dc5043607d2",
    (_USR_LIB,),
)
_pin(
    "libhogweed6",
    "3.8.1-2",
    "ed8185c28b2cb519744a5a462dcd720d3b332c9b88a1d0002eac06dc8550cb94",
    (_USR_LIB,),
)
_pin(
    "libicu72",
    "72.1-3+deb12u1",
    "f7f6f99c6d7b025914df2447fc93e11d22c44c0c8bdd8b6f36691c9e7ddcef88",
    (_USR_LIB,),
)
_pin(
    "libidn2-0",
    "2.3.3-1+b1",
    "d50716d5824083d667427817d506b45d3f59dc77e1ca52de000f3f62d4918afa",
    (_USR_LIB,),
)
_pin(
    "libk5crypto3",
    "1.20.1-2+deb12u5",
    "7b6e47d15c5c9cdcd456137533d8308aeba608a54cec73b28bd59bfc4b54cf06",
    (_USR_LIB,),
)
_pin(
    "libkeyutils1",
    "1.6.3-2",
    "cfac89e6a7a54ff3c6a4f843310e25efeddaa771baeae470bd98bd588c373563",
    (_LIB,),
)
_pin(
    "libkrb5-3",
    "1.20.1-2+deb12u5",
    "c90801be09701af221b54dd502a59cb378b7284ff31e480738baca317d2f7653",
    (_USR_LIB,),
)
_pin(
    "libkrb5support0",
    "1.20.1-2+deb12u5",
    "8b9c05f2d8d461a10d657b118f572af5bf8fd6c8f93dcef81e852c5ab0f428ab",
    (_USR_LIB,),
)
_pin(
    "libldap-2.5-0",
    "2.5.13+dfsg-5",
    "4b6c30f6554149c594628d945edc6003f0eea8d0cc1341638c0e71375db147ed",
    (_USR_LIB,),
)
_pin(
    "liblz4-1",
    "1.9.4-1",
    "64cde86cef1deaf828bd60297839b59710b5cd8dc50efd4f12643caaee9389d3",
    (_USR_LIB,),
)
_pin(
    "liblzma5",
    "5.4.1-1+deb12u2",
    "3d8c29c8c21ec6007635e1b2591edf98b771c9572a085968f47452b33040f384",
    (_LIB,),
)
_pin(
    "libnettle8",
    "3.8.1-2",
    "45922e6e289ffd92f0f92d2bb9159e84236ff202d552a461bf10e5335b3f0261",
    (_USR_LIB,),
)
_pin(
    "libp11-kit0",
    "0.24.1-2",
    "251330faddbf013f060fcdb41f4b0c037c8a6e89ba7c09b04bfcc4e3f0807b22",
    (_USR_LIB,),
)
_pin(
    "libpam0g",
    "1.5.2-6+deb12u3",
    "2cc3411d70739d7f09ee8f1dd145903320294e36bf6bda3cb56dd25eb9a8505f",
    (_LIB,),
)
_pin(
    "libpq5",
    "15.20-0+deb12u1",
    "ac8a72cc33453f75ac605b4f6b8f9febae303b9d9a61255a042a87a7f69ac5c7",
    (_USR_LIB,),
)
_pin(
    "libpython3.11-minimal",
    "3.11.2-6+deb12u9",
    "69f41cfa3f4ba17284e538f843069d7529c53c207d2ae17a5b02785944870e33",
)
_pin(
    "libpython3.11-stdlib",
    "3.11.2-6+deb12u9",
    "10f13e000ee757f5f2d2d3569f9e30546214a0c850acd78695feae373bfa3e53",
)
_pin(
    "libsasl2-2",
    "2.1.28+dfsg-10+deb12u1",
    "d6f20408e2be92ebd9f5e3b1c1935b075efb3f03abb5f48f7b991a0ad3e2d6a5",
    (_USR_LIB,),
)
_pin(
    "libssl3",
    "3.0.22-1~deb12u2",
    "cb4784740daa9b3b0eaea2b444bbefa686794afbbf3d678d238c1fd9875f2efd",
    (_USR_LIB,),
)
_pin(
    "libstdc++6",
    "12.2.0-14+deb12u1",
    "5cd3171216d4ab0fc911cfe9c35509bf2dd8f47761c43b7f6a4296701551a24d",
    (_USR_LIB,),
)
_pin(
    "libsystemd0",
    "252.39-1~deb12u2",
    "013c07514a9e4933b2d5c098018695a6aa42d085dbc483ce2c094a954c8a1b0a",
    (_USR_LIB,),
)
_pin(
    "libtasn1-6",
    "4.19.0-2+deb12u1",
    "2c27c613b69be248d09432839ea3d3382f6ee27fabaa65987aa2d884cd00afda",
    (_USR_LIB,),
)
_pin(
    "libunistring2",
    "1.0-2",
    "d466bbfe011d764d793c1d9d777cad9c7cf65b938e11598f27408171ad95a951",
    (_USR_LIB,),
)
_pin(
    "libuuid1",
    "2.38.1-5+deb12u3",
    "5fff398321da62d28a842bcbabd193d72ae21724962c029dc32b1dc6b2deaeaf",
    (_USR_LIB,),
)
_pin(
    "libxml2",
    "2.9.14+dfsg-1.3~deb12u6",
    "4460e39dda10a815881374217cde08474747cfa018358cd8612c14b390eff53b",
    (_USR_LIB,),
)
_pin(
    "libzstd1",
    "1.5.4+dfsg2-5+deb12u1",
    "67dc1ee693e5c22b1a2be2bb70d8244b040836ce3f5dd79e006f7806bc3d9f1c",
    (_USR_LIB,),
)
_pin(
    "postgresql-15",
    "15.20-0+deb12u1",
    "8566850f295c2cb5034ff5dd5b40caf97eea81b75a841c8d1f691c05ab8815db",
)
_pin(
    "python3.11-minimal",
    "3.11.2-6+deb12u9",
    "b5f855ab922dfcd5d1a3223b2118c3dae13ffc7751b0cd5dc24740386323a33a",
)
_pin(
    "tzdata",
    "2026f-0+deb12u1",
    "3254eb870c8a949518214805aee5e4276af7699988ea8b9a3a583cd0f1eab31c",
    arch="all",
)
_pin(
    "zlib1g",
    "1:1.2.13.dfsg-1",
    "d7dd1d1411fedf27f5e27650a6eff20ef294077b568f4c8c5e51466dc7c08ce4",
    (_LIB,),
)


# The loader and the C library's own libraries (not its gconv modules or tools).
LIBC = Packaged(
    "libc6",
    (
        "/lib64/ld-linux-x86-64.so.2",
        "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
        "/lib/x86_64-linux-gnu/lib*.so.*",
    ),
)


def pins(names: tuple[str, ...]) -> tuple[DebPin, ...]:
    return tuple(PINS[name] for name in names)


def libraries(names: tuple[str, ...]) -> tuple[Entry, ...]:
    """The C library and the files of these library packages, where Debian puts them, with
    the directories that hold them."""
    return (
        *(Directory(path) for path in _DIRECTORIES),
        LIBC,
        *(Packaged(name, _LIBRARY_FILES[name]) for name in names),
    )
