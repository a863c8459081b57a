# shellcheck shell=sh
# What the role needs to know about a host, found in one remote command: every task that runs a
# module on a host costs a Python start there (seconds on a small or emulated machine), so the
# read-only questions are asked together. Prints KEY=VALUE lines; never changes anything.
# Arguments: ROSETCTL_BINARY PACKAGES(comma-separated) [FILE ...] (files to checksum).
binary=$1
packages=$2
shift 2

echo "hostname=$(hostname)"
version=$("$binary" --version 2>&1)
echo "rosetctl_rc=$?"
echo "rosetctl_version=$(printf '%s' "$version" | head -n 1)"
if [ -d /run/systemd/system ]; then echo "systemd=yes"; else echo "systemd=no"; fi
initiator=$(sed -n 's/^InitiatorName=//p' /etc/iscsi/initiatorname.iscsi 2>/dev/null | head -n 1)
echo "initiator=$initiator"
if pidof iscsid > /dev/null 2>&1; then echo "iscsid=yes"; else echo "iscsid=no"; fi
missing=
for package in $(echo "$packages" | tr ',' ' '); do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$package" 2>/dev/null)
  case "$status" in ii*) ;; *) missing="$missing $package" ;; esac
done
echo "missing_packages=${missing# }"
for file in "$@"; do
  if [ -f "$file" ]; then
    echo "sha1:$file=$(sha1sum < "$file" | cut -d' ' -f1)"
  else
    echo "sha1:$file="
  fi
done
