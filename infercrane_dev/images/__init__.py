"""Reproducible OCI images for the local node, built without a registry or a container tool:
a pause image and stand-ins of the vLLM and SGLang images (see ``README.md`` beside this file).

``build_images(bin_dir, out_dir)`` writes one image-layout archive per image of the catalog
and returns each image's name, tag, manifest digest, digest-pinned reference and archive; the
real node (``localcluster.realnode``) builds and imports them when it starts. Dev-only: the
product never imports this package.
"""

from .build import BuiltImage, ImageBuildError, Sources, build_image, build_images, host_platform
from .catalog import IMAGES, REPOSITORY_PREFIX, ImageSpec

__all__ = [
    "IMAGES",
    "REPOSITORY_PREFIX",
    "BuiltImage",
    "ImageBuildError",
    "ImageSpec",
    "Sources",
    "build_image",
    "build_images",
    "host_platform",
]
