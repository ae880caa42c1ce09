#!/bin/sh
# Debian's chromium for make check-site (Playwright drives it through executable_path).
set -e
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" -eq 0 ]; then SUDO=; else SUDO=sudo; fi
echo "installing Debian's chromium (apt-get)"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium
