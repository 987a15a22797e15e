#!/usr/bin/env bash
# A Debian bookworm image with Python 3.11, of the shape of python:3.11-slim-bookworm
# (`python` and `pip` on PATH, pip free to install into the system Python), for machines
# that can reach Debian's and PyPI's mirrors but no image registry. Made with debootstrap
# and imported: `podman import`. The host's certificate trust goes in with it, so that
# apt-get and pip inside a build trust what the host trusts (a proxy's authority, say).
# Usage: base.sh IMAGE [MIRROR]
set -euo pipefail
image=$1
mirror=${2:-http://deb.debian.org/debian}
root=$(mktemp -d /var/tmp/squall-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
  bookworm "$root" "$mirror" >"$root.log" 2>&1 || { tail -20 "$root.log" >&2; exit 1; }
rm -f "$root.log" "$root"/usr/lib/python3.*/EXTERNALLY-MANAGED
ln -sf /usr/bin/python3 "$root/usr/local/bin/python"
ln -sf /usr/bin/pip3 "$root/usr/local/bin/pip"
cp /etc/ssl/certs/ca-certificates.crt "$root/usr/local/share/ca-certificates/host-trust.crt"
chroot "$root" update-ca-certificates >/dev/null
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | podman import --change 'CMD ["python3"]' - "$image" >/dev/null
echo "$image"
