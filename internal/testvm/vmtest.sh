#!/bin/sh
# vmtest.sh: one pass of the test VM suite (make vmtest runs one per kernel
# and transport). Usage:
#
#	vmtest.sh KERNEL TRANSPORT -- go test arguments (flags and packages)
#
# The packages run as go test runs them, each test binary in a VM of its
# own (go test -exec bin/vmexec). A package that fails is run once more,
# alone: the pass fails if it fails again. A package that passes the second
# time is reported as FLAKY, with its first failure left in the log above,
# and listed at the end of make vmtest: a rare failure of the interop tests
# against rdma-core's tools under QEMU TCG on a loaded host must not hide
# the rest of the run, and must not go unnoticed either. A pass whose go
# test fails without naming a failed package (a build error) fails at once.
#
# Environment: GO, VMEXEC, VMEXEC_ADD (vmexec's -add flags), and
# VMTEST_FLAKY, a file that collects the FLAKY lines.
set -u
kernel=$1
transport=$2
shift 3 # KERNEL TRANSPORT --

out=$(mktemp)
trap 'rm -f "$out" "$out.rc"' EXIT

run() {
	# go test's output goes to the log as it comes and to $out; its exit
	# status to $out.rc.
	{
		GOVERBS_TRANSPORT=$transport $GO test -count=1 -exec "$VMEXEC -kernel $kernel $VMEXEC_ADD" "$@" 2>&1
		echo $? >"$out.rc"
	} | tee "$out"
	return "$(cat "$out.rc")"
}

if run "$@"; then
	exit 0
fi

# The flags are what precede the first package (./... or a ./path), kept
# quoted for eval: a -run pattern may hold spaces or glob characters.
flags=""
for a in "$@"; do
	case $a in
	./* | github.com/*) break ;;
	esac
	flags="$flags '$(printf '%s' "$a" | sed "s/'/'\\\\''/g")'"
done

failed=$(awk '$1 == "FAIL" && NF >= 2 && $2 !~ /^\(/ {print $2}' "$out" | sort -u)
if [ -z "$failed" ]; then
	echo "vmtest: $kernel/$transport: go test failed without a failed package: not run again"
	exit 1
fi
status=0
for pkg in $failed; do
	echo "=== vmtest $kernel/$transport: $pkg failed; running it once more"
	if eval "run $flags \"\$pkg\""; then
		echo "vmtest: FLAKY $kernel/$transport $pkg: failed, then passed when run again (first failure above)" |
			tee -a "${VMTEST_FLAKY:-/dev/null}"
	else
		echo "vmtest: $kernel/$transport: $pkg failed twice"
		status=1
	fi
done
exit $status
