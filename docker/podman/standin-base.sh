#!/bin/bash
# Make sure docker.io/library/python:3.11-slim is in podman's image store, so
# docker/Dockerfile builds unchanged (`FROM python:3.11-slim`).
#
# Present: nothing to do. Pullable: pulled. Neither (a host without Docker Hub,
# like the project's CI machines): a stand-in is built from Debian packages with
# mmdebstrap (minbase bookworm + python3, from this host's apt sources), imported,
# and finished by python-standin.Containerfile. ~40 s once; later runs find it.
set -euo pipefail

IMAGE=docker.io/library/python:3.11-slim
ROOTFS=localhost/chronolog-standin-rootfs:bookworm
here=$(cd "$(dirname "$0")" && pwd)

if podman image exists "$IMAGE"; then
    echo "base image: $IMAGE present"
    exit 0
fi
if timeout 120 podman pull -q "$IMAGE" >/dev/null 2>&1; then
    echo "base image: $IMAGE pulled"
    exit 0
fi
echo "base image: $IMAGE cannot be pulled here; building a local stand-in (mmdebstrap)"

sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    # Only this host's Debian archives: third-party repositories have no place in the image.
    if [ -s "$f" ] && grep -Eq '^[^#]*(debian\.org|/debian)' "$f"; then
        sources+=("$f")
    fi
done
[ ${#sources[@]} -gt 0 ] || sources=(http://deb.debian.org/debian)

work=$(mktemp -d /tmp/chronolog-standin.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp /etc/ssl/certs/ca-certificates.crt "$work/host-ca-certificates.crt"

# Documentation, man pages and translations are left out, as in the real slim image,
# and so is perl: minbase pulls it in only for usrmerge, which a merged-/usr
# root (usr-is-merged) does not need (51 MB).
mmdebstrap --quiet --variant=minbase \
    --include=python3,python3-venv,ca-certificates,passwd,usr-is-merged \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook='chroot "$1" dpkg --purge usrmerge libfile-find-rule-perl libnumber-compare-perl libtext-glob-perl perl perl-modules-5.36 libperl5.36 >/dev/null' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    bookworm - "${sources[@]}" | podman import -q - "$ROOTFS" >/dev/null
podman build -q --format docker -t "$IMAGE" -f "$here/python-standin.Containerfile" "$work" >/dev/null
podman untag "$ROOTFS"
echo "base image: stand-in $IMAGE built ($(podman image inspect --format '{{.Size}}' "$IMAGE") bytes)"
