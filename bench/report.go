package main

import (
	_ "embed"
	"fmt"
	"math"
	"strings"
	"time"
)

var (
	dumpOrder    = []string{sysZstd, sysDLQ, sysDLQS3, sysDQ, sysDLQDurable, sysDQSync}
	restoreOrder = []string{sysZstd, sysDLQ, sysDLQS3, sysDQ}
	latOrder     = []string{sysDLQ, sysDLQS3, sysDQ, sysDLQDurable, sysDQSync}
)

func label(o *options, sys string) string {
	l := sysLabel[sys]
	if sys == sysDLQDurable || sys == sysDQSync {
		l += fmt.Sprintf(" (%d producers)", o.durProducers)
	}
	return l
}

// markdown returns the tables.
func (r *report) markdown(o *options, h string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	w("%s## Dump\n\n", h)
	w("Items enqueued until everything is closed and published, best of the rounds. *of ceiling*: payload MB/s over zstd's on one core. *stored*: bytes on disk (S3: object bytes; zstd: its frames alone); *payload ÷ stored*: how much smaller the stored form is. *files*: segments, go-diskqueue data files or S3 objects.\n\n")
	w("| data set | system | items/s | MB/s | of ceiling | stored | payload ÷ stored | files | peak RSS |\n")
	w("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range r.Sets {
		ceil := s.Dump[sysZstd].mbps()
		for _, sys := range dumpOrder {
			d := s.Dump[sys]
			if d == nil {
				continue
			}
			files := fmt.Sprint(d.Files)
			if sys == sysZstd {
				files = "–"
			}
			w("| %s | %s | %s | %.1f | %s | %s | %.2f× | %s | %s |\n", s.Name, label(o, sys), count(d.rate()), d.mbps(),
				pctOf(d.mbps(), ceil), human(d.Disk), float64(d.Payload)/float64(max(d.Disk, 1)), files, human(d.PeakRSS))
		}
	}
	w("\n")

	w("%s## Restore (read-back)\n\n", h)
	w("Everything a buffered dump stored, read back and handed to a destination that accepts all; best of the rounds. *of ceiling*: payload MB/s over zstd DecodeAll's on one core.\n\n")
	w("| data set | system | items/s | MB/s | of ceiling | peak RSS |\n")
	w("| --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, s := range r.Sets {
		ceil := s.Restore[sysZstd].mbps()
		for _, sys := range restoreOrder {
			d := s.Restore[sys]
			if d == nil {
				continue
			}
			w("| %s | %s | %s | %.1f | %s | %s |\n", s.Name, restoreLabel[sys], count(d.rate()), d.mbps(), pctOf(d.mbps(), ceil), human(d.PeakRSS))
		}
	}
	w("\n")

	w("%s## Enqueue latency\n\n", h)
	w("p50 / p99 / p99.9 of each Enqueue (go-diskqueue: Put) at 25%%, 50%% and 90%% of that system's sustained rate (*sustained*: the median of its dump rounds); *calls*: how many were timed at 90%%. A load marked (N%%) was not reached: the producers, blocked in Enqueue, offered only N%% of it. dlqdump's Durable Enqueue returns after its record's fdatasync; go-diskqueue's Put returns *before* its fsync even with SyncEvery 1 (the next Put waits for it), so its latency leaves the sync out.\n\n")
	w("| data set | system | sustained items/s | at 25%% | at 50%% | at 90%% | calls |\n")
	w("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range r.Sets {
		for _, sys := range latOrder {
			l := s.Latency[sys]
			if l == nil || len(l.Latency) == 0 {
				continue
			}
			w("| %s | %s | %s |", s.Name, label(o, sys), count(medianOf(s.Rounds[sys])))
			for _, p := range l.Latency {
				cell := fmt.Sprintf("%s / %s / %s", dur(p.P50), dur(p.P99), dur(p.P999))
				if p.Achieved < 0.95*p.Target {
					cell += fmt.Sprintf(" (%.0f%%)", 100*p.Achieved/p.Target)
				}
				w(" %s |", cell)
			}
			w(" %d |\n", l.Latency[len(l.Latency)-1].Count)
		}
	}
	w("\n")

	if len(r.Items) > 0 {
		w("%s## Scaling: items\n\n", h)
		w("dlqdump → fs, buffered, typical items: N items dumped into an empty directory, then restored (median of *runs*). Flat or falling ns/item means the total cost is linear in N. Peak RSS of the dump includes the blocks pending under MaxPending, the finished blocks the Queue keeps for reuse and the garbage collector's headroom.\n\n")
		w("| items | payload | dump ns/item | restore ns/item | segments | stored | dump peak RSS | restore peak RSS | runs |\n")
		w("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, it := range r.Items {
			p := it.ScaleN
			w("| %s | %s | %.0f | %.0f | %d | %s | %s | %s | %d |\n", pow10(p.N), human(it.Payload),
				perItem(p.Dump, p.N), perItem(p.Restore, p.N), p.Segments, human(it.Disk), human(it.PeakRSS), human(p.RestoreRSS), p.Repeat)
		}
		w("\n")
	}
	if len(r.Segs) > 0 {
		w("%s## Scaling: segments in a directory\n\n", h)
		w("A directory of K segments (%d typical records each). *full listing*: fs.Reader.List over all K, best of 3. *Claim+Release*: median over up to %d segments spread over the listing. *restore per segment*: a Restorer pass restoring the oldest up to %d segments, each timed from its Claim to its Complete (claim, read, deliver, checkpoint, delete; median).\n\n", segmentRecords, maxSampled, maxSampled)
		w("| segments | full listing | listing per segment | Claim+Release | restore per segment |\n")
		w("| ---: | ---: | ---: | ---: | ---: |\n")
		for _, it := range r.Segs {
			p := it.Segments
			w("| %s | %s | %s | %s | %s |\n", pow10(p.Segments), dur(p.List), dur(p.List/time.Duration(p.Segments)), dur(p.Claim), dur(p.Restore))
		}
		w("\n")
	}
	return b.String()
}

// highlights returns sentences comparing the systems, computed from the
// figures.
func (r *report) highlights(o *options) []string {
	var out []string
	for _, s := range r.Sets {
		dl, dq, z := s.Dump[sysDLQ], s.Dump[sysDQ], s.Dump[sysZstd]
		if dl == nil || dq == nil || z == nil {
			continue
		}
		line := fmt.Sprintf("**%s** (%d B): dlqdump dumps %s items/s, %s go-diskqueue and %s of one core's zstd, storing %s fewer bytes than go-diskqueue (%.2f× smaller than the payload)",
			s.Name, s.Mean, count(dl.rate()), ratio(dl.rate(), dq.rate()), pctOf(dl.mbps(), z.mbps()),
			ratio(float64(dq.Disk)/float64(dq.Payload), float64(dl.Disk)/float64(dl.Payload)), float64(dl.Payload)/float64(dl.Disk))
		if rl, rq := s.Restore[sysDLQ], s.Restore[sysDQ]; rl != nil && rq != nil {
			line += fmt.Sprintf("; restores %s items/s, %s go-diskqueue's read-back", count(rl.rate()), ratio(rl.rate(), rq.rate()))
		}
		if a, b := s.Dump[sysDLQDurable], s.Dump[sysDQSync]; a != nil && b != nil {
			line += fmt.Sprintf("; Durable %s items/s against %s for go-diskqueue with SyncEvery 1 (%s)", count(a.rate()), count(b.rate()), ratio(a.rate(), b.rate()))
		}
		if d3 := s.Dump[sysDLQS3]; d3 != nil {
			line += fmt.Sprintf("; into S3 %s items/s, restored from S3 at %s items/s", count(d3.rate()), count(s.Restore[sysDLQS3].rate()))
		}
		out = append(out, line+".")
	}
	if len(r.Items) > 1 {
		const spread = "falls, as start-up and the final sync are spread over more items"
		lo, hi := r.Items[0].ScaleN, r.Items[len(r.Items)-1].ScaleN
		out = append(out, fmt.Sprintf("From %s to %s items (%s of payload), the dump costs %.0f then %.0f ns per item (%s) and the restore %.0f then %.0f ns (%s).",
			pow10(lo.N), pow10(hi.N), human(r.Items[len(r.Items)-1].Payload),
			perItem(lo.Dump, lo.N), perItem(hi.Dump, hi.N), trend(perItem(lo.Dump, lo.N), perItem(hi.Dump, hi.N), spread),
			perItem(lo.Restore, lo.N), perItem(hi.Restore, hi.N), trend(perItem(lo.Restore, lo.N), perItem(hi.Restore, hi.N), spread)))
	}
	if len(r.Segs) > 1 {
		lo, hi := r.Segs[0].Segments, r.Segs[len(r.Segs)-1].Segments
		ll, hl := lo.List/time.Duration(lo.Segments), hi.List/time.Duration(hi.Segments)
		rl, rc, rr := float64(hl)/float64(ll), float64(hi.Claim)/float64(lo.Claim), float64(hi.Restore)/float64(lo.Restore)
		grow := float64(hi.Segments) / float64(lo.Segments)
		verdict := fmt.Sprintf("per-segment costs stay within %.1f× while the directory grew %s×: listing and claiming are not quadratic (that would multiply them by %s)",
			max(rl, rc, rr), count(grow), count(grow))
		if max(rl, rc, rr) > 2 {
			verdict = fmt.Sprintf("a per-segment cost grew %.1f× while the directory grew %s×", max(rl, rc, rr), count(grow))
		}
		out = append(out, fmt.Sprintf("From %s to %s segments in one directory, listing costs %s then %s per segment (%.2f×), Claim+Release %s then %s (%.2f×), restoring a segment %s then %s (%.2f×): %s.",
			pow10(lo.Segments), pow10(hi.Segments), dur(ll), dur(hl), rl, dur(lo.Claim), dur(hi.Claim), rc,
			dur(lo.Restore), dur(hi.Restore), rr, verdict))
	}
	return out
}

// notes are figures taken with go test by hand, kept in BENCHMARKS.md after
// this tool's.
//
//go:embed notes.md
var notes string

// document returns BENCHMARKS.md.
func (r *report) document(o *options, charts []string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Benchmarks\n\n")
	w("<!-- Generated by bench/ (%s); edit bench/report.go, not this file. -->\n\n", r.Command)
	w("dlqdump against the nearest Go peer, NSQ's [go-diskqueue](https://github.com/nsqio/go-diskqueue) v1.1.0 (a file-backed FIFO: one `write` per message, no compression), and against plain zstd on one core (the ceiling), in one run on the same generated data. Every measurement ran in its own child process, so each peak RSS is that system's alone. Figures vary ±15%% between runs on a shared machine: compare ratios within one run.\n\n")
	if r.Smoke {
		w("**This is a -smoke run: the sizes are far too small for the figures to mean much.**\n\n")
	}
	w("```sh\n%s\n```\n\n", r.Command)
	w("| machine | |\n| --- | --- |\n")
	w("| CPU | %s |\n| cores | %d logical, GOMAXPROCS %d |\n| kernel | %s (%s) |\n| memory | %s |\n| file system | %s |\n| Go | %s |\n| date | %s, took %s |\n| load average | %s at the start, %s at the end (1, 5, 15 min) |\n\n",
		r.Machine.CPU, r.Machine.Cores, r.Machine.GOMAXPROCS, r.Machine.Kernel, r.Machine.OS, r.Machine.Memory, r.Machine.FS, r.Machine.Go,
		r.Started.Format("2006-01-02 15:04 UTC"), r.Took, r.Machine.Load, r.LoadEnd)
	w("Data sets (deterministic, from the `gen` package; ~8 MiB of distinct items each, cycled):\n\n")
	for _, s := range r.Sets {
		n := 0
		if d := s.Dump[sysZstd]; d != nil {
			n = d.Items
		}
		w("* **%s** — %s; %d B on average; %s items per buffered run.\n", s.Name, s.Desc, s.Mean, count(float64(n)))
	}
	w("\n")
	if hl := r.highlights(o); len(hl) > 0 {
		w("## Summary\n\n")
		for _, l := range hl {
			w("* %s\n", l)
		}
		w("\n")
	}
	for _, c := range charts {
		w("![%s](%s)\n\n", strings.TrimSuffix(c, ".png"), c)
	}
	b.WriteString(r.markdown(o, "#"))
	w("## How it was measured\n\n")
	for _, c := range r.Config {
		w("* %s\n", c)
	}
	w("* S3: %s.\n", r.S3)
	w("\n")
	if len(r.Gaps) > 0 {
		w("## Not measured in this run\n\n")
		for _, g := range r.Gaps {
			w("* %s\n", g)
		}
		w("\n")
	}
	b.WriteString(notes)
	return b.String()
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// count formats a rate or count with thousands separators.
func count(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func dur(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%d ns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d.Nanoseconds())/1e6)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func perItem(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(n) }

func pctOf(x, of float64) string {
	if of <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*x/of)
}

// trend says how a cost went from a to b.
func trend(a, b float64, falls string) string {
	switch r := b / a; {
	case r < 0.9:
		return fmt.Sprintf("÷%.1f: %s", a/b, falls)
	case r <= 1.25:
		return fmt.Sprintf("%.2f×: flat", r)
	default:
		return fmt.Sprintf("%.2f×: it grows", r)
	}
}

// ratio says how a compares with b: "3.2× " or "0.5× ".
func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func pow10(n int) string {
	e := math.Log10(float64(n))
	if e == math.Trunc(e) && n >= 10 {
		return fmt.Sprintf("10^%d", int(e))
	}
	return count(float64(n))
}
