#!/usr/bin/env bash
# compare.sh BEFORE AFTER: fails (and shows the differences) when two
# snapshots made by snapshot.sh differ.
set -euo pipefail
before=${1:?usage: test/kubeadm/compare.sh BEFORE AFTER}
after=${2:?usage: test/kubeadm/compare.sh BEFORE AFTER}
if diff -r -u "$before" "$after"; then
	echo "host unchanged: $(ls "$before" | tr '\n' ' ')"
else
	echo "the host differs from its snapshot (lines with - were there before, + are new)" >&2
	exit 1
fi
