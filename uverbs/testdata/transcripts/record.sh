#!/usr/bin/env bash
# Records the transcripts the uverbs unit tests replay: the scenario of
# transcript_test.go run on each real kernel in the test VM, once per
# transport. Run from the repository root after `make vmexec`.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
out="$root/uverbs/testdata/transcripts"
cd "$root"
go test -c -o /tmp/uverbs-record.test ./uverbs
for kernel in 6.1 6.12; do
	for mode in ioctl write; do
		log=$(mktemp)
		(cd "$root/uverbs" && GOVERBS_TRANSPORT=$mode "$root/bin/vmexec" -kernel "$kernel" -- /tmp/uverbs-record.test \
			-test.run '^TestRecordTranscript$' -record) >"$log"
		awk -v start="=== goverbs transcript begin $kernel-$mode" '
			$0 == start { on = 1; next }
			/^=== goverbs transcript end/ { on = 0 }
			on { print }' "$log" >"$out/$kernel-$mode.jsonl"
		rm -f "$log"
		test -s "$out/$kernel-$mode.jsonl" || { echo "no transcript for $kernel $mode" >&2; exit 1; }
		echo "recorded $kernel-$mode: $(wc -l <"$out/$kernel-$mode.jsonl") lines"
	done
done
