# shellcheck shell=bash
# times.sh: the stage table of scripts/test.sh (sourced by it).
#
# Every stage and step of a run, in whichever lane it ran, appends one line to
# $TIMES_DIR/times.tsv: its name, start and end (epoch seconds) and how it ended.
# A sampler reads /proc/stat every 5 s into $TIMES_DIR/cpu.tsv, so each row also
# says how busy the machine's CPUs were meanwhile (all lanes together: a stage
# beside another shares them). At the end (passed or not) times_report prints
# the table and appends the run's rows to $QK_CACHE/test-times.tsv (one file
# across runs and clones: a regression shows from one run to the next).
#
# Invariant: rows are written only by times_record, each with one printf of
# less than PIPE_BUF bytes in O_APPEND mode, so the lanes' rows never mix.

# cpu_sample: one line of cpu.tsv — now (epoch seconds), the CPUs' busy and
# total jiffies since boot (busy: user, nice, system, irq, softirq).
cpu_sample() {
	awk -v t="$(date +%s)" '$1 == "cpu" { busy = $2 + $3 + $4 + $7 + $8; print t "\t" busy "\t" busy + $5 + $6; exit }' /proc/stat
}

# times_init DIR KIND: start a run's table in DIR (emptied); KIND is cold or warm.
times_init() {
	TIMES_DIR=$1 TIMES_KIND=$2 TIMES_T0=$(date +%s)
	mkdir -p "$TIMES_DIR"
	: >"$TIMES_DIR/times.tsv"
	: >"$TIMES_DIR/cpu.tsv"
	(
		while :; do
			cpu_sample
			sleep 5
		done
	) >>"$TIMES_DIR/cpu.tsv" 2>/dev/null &
	TIMES_SAMPLER=$!
	export TIMES_DIR TIMES_KIND TIMES_T0
}

# times_record NAME START END STATUS: one row (START and END in epoch seconds).
times_record() {
	printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$TIMES_DIR/times.tsv"
}

# times_busy START END: the CPUs' busy share (percent of all cores) between the
# last sample at or before START and the first at or after END.
times_busy() {
	awk -F'\t' -v s="$1" -v e="$2" '
		$1 <= s { b0 = $2; t0 = $3 }
		$1 >= e && !done { b1 = $2; t1 = $3; done = 1 }
		END { if (t0 != "" && t1 != "" && t1 > t0) printf "%d%%", 100 * (b1 - b0) / (t1 - t0); else printf "-" }
	' "$TIMES_DIR/cpu.tsv"
}

# times_report STATUS: print the table (rows by start) and append them to the
# cross-run file; STATUS is how the whole run ended (passed or failed).
times_report() {
	local status=$1 end name s e st commit run busy
	end=$(date +%s)
	kill "$TIMES_SAMPLER" 2>/dev/null || true
	cpu_sample >>"$TIMES_DIR/cpu.tsv"
	commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
	run=$(date -u -d "@$TIMES_T0" +%Y-%m-%dT%H:%M:%SZ)
	printf '\n=== stage table (%s run of %s, %s)\n' "$TIMES_KIND" "$commit" "$run"
	printf '%-78s %8s %8s %5s  %s\n' "stage" "start" "wall" "cpu" "ended"
	{ sort -t$'\t' -k2,2n "$TIMES_DIR/times.tsv"; printf 'total\t%s\t%s\t%s\n' "$TIMES_T0" "$end" "$status"; } |
		while IFS=$'\t' read -r name s e st; do
			busy=$(times_busy "$s" "$e")
			printf '%-78.78s %8s %8s %5s  %s\n' "$name" "+$(mmss $((s - TIMES_T0)))" "$(mmss $((e - s)))" "$busy" "$st"
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$commit" "$TIMES_KIND" "$name" $((s - TIMES_T0)) $((e - s)) "$busy" "$st" >>"$TIMES_DIR/rows.tsv"
		done
	mkdir -p "$CACHE"
	[[ -s $CACHE/test-times.tsv ]] || printf 'run\tcommit\tkind\tstage\tstart_s\twall_s\tcpu\tended\n' >"$CACHE/test-times.tsv"
	cat "$TIMES_DIR/rows.tsv" >>"$CACHE/test-times.tsv"
	rm -f "$TIMES_DIR/rows.tsv"
	echo "(rows appended to $CACHE/test-times.tsv; cpu: the machine's cores busy meanwhile, every lane together)"
}
