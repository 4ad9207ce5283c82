package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

type restoreFlags struct {
	to          string
	rate        float64
	maxAttempts int
	concurrency int
	retryBase   time.Duration
	retryMax    time.Duration
	timeout     time.Duration
	contentType string
	dryRun      bool
	archive     bool
	version     string
	lease       time.Duration
	ff          filterFlags
	jq          jqFlags
	// ids are the records a replay delivers (dlqdump replay), ANDed with
	// the filters; action is what the change log calls the run.
	ids    []segment.RecordID
	action string
}

func newRestoreCmd(a *app) *cobra.Command {
	var f restoreFlags
	cmd := &cobra.Command{
		Use:   "restore LOCATION [SEGMENT...]",
		Short: "Redrive records to stdout or an HTTP endpoint, then delete them",
		Long: `Redrive the ready records of a dump (all, the named segments, or those the
filters select) with a dlqdump.Restorer, which claims each segment so that
it never races another restorer, and delete what was delivered (--archive:
move it to the archive area). Records the filters do not select stay ready
in their segment, which is not rewritten: its claim record says which of
its records are delivered, and the next pass reads only the others.

Without --to, each record is written to stdout as one JSON object and line:
  {"headers":{"reason":"failed","record-id":"019a3f2c7d1e5b8a90c4d2e1-0","replays":"1"},"payload":"{\"id\":1}"}
(payload_base64 as for cat; the headers are those delivered: "replays" is
raised by one on every restore, "record-id" is the record's ID). A record counts as delivered once written,
and its segment is deleted once done, as with --to: to look at records and
keep them, use dlqdump cat. On a terminal, restore says so and asks first
(and does not start without an answer); redirected to a file or a pipe, it
does not ask.

With --to URL, each record is POSTed to URL, its payload as the body
(Content-Type from --content-type) and each header as an X-Dlq-KEY request
header (X-Dlq-Reason, X-Dlq-Source, X-Dlq-Replays, ...; characters of KEY
other than letters, digits and "-" become "-"; values that are not printable
ASCII are RFC 2047 encoded), and the record's ID as Idempotency-Key (and
X-Dlq-Record-Id): the same on every delivery of the record, after a crash,
cp, mv, rewrap or a release, so the endpoint can drop what it has seen. A
2xx answer is a delivery. --concurrency
POSTs are in flight at once; the checkpoint only passes records whose
predecessors were all delivered, so an interrupted or stopped restore
resumes at the first record not known to be delivered: after an interrupt,
which lets the POSTs in flight finish, the records accepted after it (at
most --concurrency - 1) are posted again; after an outage, which cancels
them, those in flight (at most --concurrency) may be.

Other answers are told apart. A 3xx (redirects are not followed) or a 4xx
other than 408, 425 and 429 is the endpoint refusing that record: it is not
retried, it is written to the quarantine area with the reason (see dlqdump
quarantine), never deleted, and the exit status is 4. A connection error, a
timeout (--timeout), 408, 425, 429 or 5xx is the endpoint being unavailable:
it is retried with exponential backoff and full jitter (between 0 and
--retry-base doubled per attempt, at most --retry-max; a Retry-After answer
is honoured up to a minute), up to --max-attempts in all; still there, it
stops the restore at once (the POSTs in flight are cancelled): the record,
and every record after it, stays ready, the checkpoint names it as the next
to deliver, nothing is quarantined, and the exit status is 5. Run the same
command again once the endpoint is back. An endpoint that answers 5xx to one
record only stops every restore at that record: look at it with dlqdump cat.

--jq PROGRAM changes each record on its way (a jq program, gojq): it sees
{"id":..., "time":..., "headers":{...}, "payload":...} (the payload's JSON
value, or its text, or its base64 with "payload_base64": true) and returns
it changed, e.g. '.payload.email |= ascii_downcase' or
'.headers.error = null'. The stored record never changes; a record the
program fails on (error("why"), no result, a type error) is quarantined
with the error. With --dry-run, the first --sample records it changes or
refuses are shown as a unified diff of their JSON, before and after. A
program that does not compile is refused naming the column. A changed
payload is written as gojq writes JSON (keys sorted, compact);
--jq-keep-layout keeps its stored bytes but for what the program changes
(the same JSON value), and a simple field fix then costs a fraction of
writing the JSON again.

With --to nats://HOST:PORT/SUBJECT or --to kafka://HOST:PORT/TOPIC (in the
dlqdump built by the brokers module: cd brokers && go run ./cmd/build-dlqdump),
each record is published to NATS JetStream or Kafka, its payload as the
message's, its headers as the message's headers and its record ID as the
message ID; the broker's acknowledgement is a delivery. A broker that is
down, unreachable, times out, or has no stream or topic for the subject is
unavailable, retried and then stops the restore as above (exit status 5); a
message the broker refuses for its size is quarantined (exit status 4).

--rate caps deliveries per second. --limit N stops after N records were
delivered or quarantined: at most N are offered to the destination. --dry-run reads everything and prints
what would be delivered, by reason, changing nothing. Segments of any data
Version are restored unless --version is given; then segments of other
versions are moved to quarantine (by a restore without --where, --since or
--until: a filtered one leaves them in place).

An interrupt (Ctrl-C) stops at the record being delivered and keeps a
checkpoint (the segment's claim record), so the next restore resumes there.
A restore that is killed instead resumes at its last checkpoints: the records
of at most one block of each segment in flight (8) are delivered again.

Segments are claimed like any restorer claims them. A segment whose claim
another process holds is watched after the pass: if the claim is renewed, its
holder is alive and the segment is left to it; if it stays unchanged for the
holder's lease (a restore or mv that was killed), it is taken over and
restored.`,
		Example: `  dlqdump restore /var/lib/app/dlq --dry-run
  dlqdump restore /var/lib/app/dlq --to http://orders.internal:8080/redrive --rate 200
  dlqdump restore /var/lib/app/dlq --where reason=failed --since 24h --to http://localhost:8080/in
  dlqdump restore s3://dead-letters/orders/ --limit 100 > redriven.jsonl
  dlqdump restore /var/lib/app/dlq --select 'error ~ "missing currency"' --jq '.payload.currency //= "EUR"' --dry-run`,
		Args: argsRange(1, -1, "LOCATION [SEGMENT...]"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.restore(args[0], args[1:], &f)
		}),
	}
	f.register(cmd.Flags())
	return cmd
}

// register defines the flags of restore (and replay) on fl.
func (f *restoreFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.to, "to", "", "deliver each record to this URL: "+strings.Join(destForms(), ", ")+" (default: JSON lines on stdout)")
	fl.Float64Var(&f.rate, "rate", 0, "deliveries per second at most (0: no limit)")
	fl.IntVar(&f.maxAttempts, "max-attempts", 5, "attempts per record while the endpoint is unavailable, before the restore stops (--to)")
	fl.IntVar(&f.concurrency, "concurrency", 4, "deliveries in flight at once: POSTs or publishes (--to)")
	durationVar(fl, &f.retryBase, "retry-base", 100*time.Millisecond, "first backoff bound between attempts (--to)")
	durationVar(fl, &f.retryMax, "retry-max", 10*time.Second, "largest backoff bound between attempts (--to)")
	durationVar(fl, &f.timeout, "timeout", 30*time.Second, "time limit of one HTTP request, or of a publish and its acknowledgement (--to)")
	fl.StringVar(&f.contentType, "content-type", "application/octet-stream", "Content-Type of the POSTed payloads (--to)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "count what would be delivered, by reason; change nothing")
	fl.BoolVar(&f.archive, "archive", false, "move restored segments to the archive area instead of deleting them")
	fl.StringVar(&f.version, "version", "", "restore only segments of this data Version (e.g. 1.2 or 1.2.0.0); others go to quarantine (default: any version)")
	durationVar(fl, &f.lease, "lease", 30*time.Second, "claim lease on each segment, renewed every third of it")
	_ = fl.MarkHidden("lease")
	f.ff.register(fl)
	f.jq.register(fl, true)
}

func (a *app) restore(loc string, names []string, f *restoreFlags) error {
	flt, err := f.ff.parse(time.Now())
	if err != nil {
		return err
	}
	if len(f.ids) > 0 {
		flt.withIDs(f.ids)
	}
	switch {
	case f.rate < 0:
		return usageErrorf("--rate %v: want 0 (no limit) or more", f.rate)
	case f.maxAttempts < 1:
		return usageErrorf("--max-attempts %d: want at least 1", f.maxAttempts)
	case f.concurrency < 1 || f.concurrency > maxConcurrency:
		return usageErrorf("--concurrency %d: want 1 to %d", f.concurrency, maxConcurrency)
	case f.retryBase <= 0 || f.retryMax < f.retryBase:
		return usageErrorf("--retry-base %s, --retry-max %s: want 0 < base <= max", f.retryBase, f.retryMax)
	case f.timeout <= 0:
		return usageErrorf("--timeout %s: want more than 0", f.timeout)
	case f.lease < time.Second:
		return usageErrorf("--lease %s: want at least 1s", f.lease)
	}
	a.lease = f.lease
	var version dlqdump.Version
	anyVersion := f.version == ""
	if !anyVersion {
		if version, err = dlqdump.ParseVersion(f.version); err != nil {
			return usageErrorf("--version %q: want 1 to 4 dot-separated numbers, e.g. 1.2", f.version)
		}
	}
	jq, err := f.jq.compile()
	if err != nil {
		return err
	}
	var target *url.URL
	if f.to != "" {
		if target, err = parseTo(fmt.Sprintf("--to %q", f.to), f.to); err != nil {
			return err
		}
	}
	l, err := a.open(loc, true)
	if err != nil {
		return err
	}
	if target == nil && !f.dryRun {
		if err := a.confirmStdoutRestore(l, os.Stdin); err != nil {
			return err
		}
	}
	ready, err := a.list(l, []sink.Area{sink.AreaReady}, names)
	if err != nil {
		return err
	}
	var total int64
	if a.progressEnabled() && !f.dryRun {
		sums, err := a.summarizeAll(l, ready)
		if err != nil {
			return err
		}
		for _, s := range sums {
			total += int64(s.Records)
			if s.Claim != nil && s.Claim.ProgErr == nil {
				total -= int64(min(s.Records, s.Claim.Prog.Seq))
			}
		}
	}

	runCtx, cancelRun := context.WithCancel(a.ctx)
	defer cancelRun()
	var dest interface{ Enqueue(any) error }
	var hd *httpDest
	var sd *stdoutDest
	var bd *schemeDest // a broker's (destscheme.go)
	concurrency := 1
	if target != nil && !isHTTP(target) {
		if bd, err = openSchemeDest(runCtx, a.soft, target, f, a); err != nil {
			return err
		}
		defer bd.d.Close()
		dest = bd
		concurrency = f.concurrency
	} else if target != nil {
		hd = newHTTPDest(runCtx, a.soft, target.String(), f)
		dest = hd
		concurrency = f.concurrency
	} else {
		sd = &stdoutDest{w: a.stdout, cancel: cancelRun}
		dest = sd
	}
	cfg := &dlqdump.Config{
		Version:         version,
		Reader:          l.reader,
		Decoder:         decoder.Fallthrough{},
		Queue:           dest,
		DeliverEnvelope: true,
		// The destination retries what is worth retrying itself: one
		// refusal is final.
		MaxAttempts: 1,
		Concurrency: concurrency,
		AllowRate:   1,
		RateLimit:   f.rate,
		Archive:     f.archive,
		Lease:       f.lease,
		Logger:      a.logger(),
		Owner:       cliOwner(),
		// 0: the default, 8 MiB.
		MaxRecordSize: a.recordSize.size,
	}
	if anyVersion {
		cfg.VersionCompatible = func(_, _ dlqdump.Version) bool { return true }
	}
	ids, err := a.identities()
	if err != nil {
		return err
	}
	cfg.Encryption = &dlqdump.Encryption{Identities: ids}
	if l.isS3() {
		// Every checkpoint is a PUT: at most one every two seconds.
		cfg.CheckpointInterval = 2 * time.Second
	}
	r, err := dlqdump.NewRestorer(cfg)
	if err != nil {
		return err
	}
	defer r.Close()
	go func() {
		select {
		case <-a.soft.Done():
			// Stop at the next block, keeping a checkpoint.
			_ = r.Shutdown(a.ctx)
		case <-runCtx.Done():
		}
	}()
	opts := runOptions(flt)
	opts.DryRun = f.dryRun
	if jq != nil {
		jq.Apply(&opts)
		if f.dryRun {
			opts.Sample = f.jq.sample
		}
	}
	if len(names) > 0 {
		opts.Segments = names
	}
	var bar *progress
	if !f.dryRun {
		bar = a.newProgress("restoring", total, false)
		if hd != nil {
			hd.bar = bar
		} else if bd != nil {
			bd.bar = bar
		} else {
			sd.bar = bar
		}
	}
	rep, runErr := r.Run(runCtx, opts)
	if onlyNoKey(runErr, &rep) && !f.dryRun && rep.Claimed > 0 && !a.interrupted() {
		runErr = errors.Join(runErr, a.restoreClaimed(l, r, runCtx, opts, &rep))
	}
	if errors.Is(runErr, segment.ErrNoKey) && len(ids) > 0 {
		// The library's error names the segments; which advice fits
		// depends on whether identities were given.
		runErr = fmt.Errorf("%w (none of the identities given unwraps its key: %s)", runErr, otherKeyHint)
	} else {
		runErr = keyHint(runErr)
	}
	bar.finish()
	if sd != nil && sd.failed != nil {
		return fmt.Errorf("writing to stdout failed: %v; the segment being restored keeps its undelivered records", sd.failed)
	}
	if f.dryRun {
		if err := a.printDryRun(l, &rep); err != nil {
			return err
		}
		if jq != nil {
			printChanges(a.stdout, &rep, f.jq.sample)
		}
		return withCode(exitError, runErr)
	}
	a.printReport(l, f.to, &rep, hd)
	a.logRestore(l, f, flt, names, &rep, runErr)
	if f.action == changelog.ActionReplay && runErr == nil && rep.Delivered+rep.Quarantined == 0 {
		return fmt.Errorf("no ready record of %s is selected: nothing was replayed (restored already, discarded or quarantined? dlqdump cat %s --area all --select %q)",
			l, l.raw, flt.sel.String())
	}
	if errors.Is(runErr, dlqdump.ErrUnavailable) {
		a.warnf("%v", runErr)
		a.warnf("the restore stopped: that record and every record after it stay ready, nothing was set aside; run the same restore again when the destination is back")
		return silentExit(exitUnavailable)
	}
	if runErr != nil {
		if errors.Is(runErr, dlqdump.ErrClosed) && a.interrupted() {
			return nil
		}
		return runErr
	}
	notDelivered := rep.Quarantined > 0 || rep.QuarantinedSegments > 0 || rep.DamagedBlocks > 0
	if notDelivered {
		a.warnf("some records were not delivered; they are kept in quarantine: dlqdump quarantine ls %s", l.raw)
		return silentExit(exitUndelivered)
	}
	return nil
}

// onlyNoKey reports whether err is nil or says only that the pass of rep
// left encrypted segments for want of a key: the pass went on with the
// others.
func onlyNoKey(err error, rep *dlqdump.Report) bool {
	if err == nil {
		return true
	}
	if rep.NoKeySegments == 0 || !errors.Is(err, dlqdump.ErrNoKey) {
		return false
	}
	j, ok := err.(interface{ Unwrap() []error })
	return !ok || len(j.Unwrap()) == 1
}

// logger returns a logger for the library's warnings, printed on stderr as
// "dlqdump: warning: MESSAGE key=value ...".
func (a *app) logger() *slog.Logger {
	return slog.New(&warnHandler{a: a, level: slog.LevelWarn})
}

// eventLogger returns a logger for a long-running command's events too
// (dlqdump job run: every job's start, end, pause, cancel, hand-over and
// failure), printed on stderr with their time as "TIME dlqdump: MESSAGE
// key=value ..." (unless --quiet), the warnings as logger prints them.
func (a *app) eventLogger() *slog.Logger {
	return slog.New(&warnHandler{a: a, level: slog.LevelInfo, times: true})
}

// warnHandler prints records of level and above through app.printErr. The
// Restorer's component and owner attributes are left out.
type warnHandler struct {
	a     *app
	level slog.Level
	times bool // each line starts with the record's time
	attrs []slog.Attr
}

// Enabled reports whether records of level l are printed.
func (h *warnHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level && (l >= slog.LevelWarn || !h.a.quiet)
}

// Handle prints a record as one line.
func (h *warnHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	if h.times {
		b.WriteString(r.Time.UTC().Format("2006-01-02T15:04:05.000Z "))
	}
	b.WriteString("dlqdump: ")
	if r.Level >= slog.LevelWarn {
		b.WriteString("warning: ")
	}
	b.WriteString(r.Message)
	add := func(at slog.Attr) bool {
		if at.Key == "component" || at.Key == "owner" || at.Equal(slog.Attr{}) {
			return true
		}
		b.WriteString(" ")
		b.WriteString(at.Key)
		b.WriteString("=")
		b.WriteString(quoteIfNeeded(at.Value.Resolve().String()))
		return true
	}
	for _, at := range h.attrs {
		add(at)
	}
	r.Attrs(add)
	h.a.printErr(b.String())
	return nil
}

// WithAttrs returns a handler printing attrs with every record.
func (h *warnHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &warnHandler{a: h.a, level: h.level, times: h.times, attrs: append(slices.Clip(h.attrs), attrs...)}
}

// WithGroup returns h: groups are not shown.
func (h *warnHandler) WithGroup(string) slog.Handler { return h }

// reasonRows returns a report's reasons, most frequent first; "" is shown as
// (none).
func reasonRows(by map[string]uint64) *table {
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int {
		if c := cmp.Compare(by[y], by[x]); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	t := newTable(1)
	for _, k := range keys {
		label := k
		switch {
		case k == "":
			label = "(none)"
		case k == "quarantine: damaged":
			label = "quarantine: damaged (segments)"
		}
		t.add("  "+label, strconv.FormatUint(by[k], 10))
	}
	return t
}

func (a *app) printDryRun(l *location, rep *dlqdump.Report) error {
	var quar uint64
	for k, n := range rep.ByReason {
		if strings.HasPrefix(k, "quarantine: ") && k != "quarantine: damaged" {
			quar += n
		}
	}
	w := a.stdout
	fmt.Fprintf(w, "dry run of restore from %s: nothing was changed\n", l)
	fmt.Fprintf(w, "would deliver    %s (%s)\n", plural(rep.Delivered, "record"), humanBytes(rep.Bytes))
	fmt.Fprintf(w, "would quarantine %s", plural(quar, "record"))
	if rep.QuarantinedSegments > 0 {
		fmt.Fprintf(w, " (%s moved whole)", plural(rep.QuarantinedSegments, "segment"))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "would leave      %s not selected by the filters\n", plural(rep.Skipped, "record"))
	if rep.DamagedBlocks > 0 {
		fmt.Fprintf(w, "damaged blocks   %d (their records cannot be restored; run dlqdump verify)\n", rep.DamagedBlocks)
	}
	if rep.ReleasedDamagedBlocks > 0 {
		fmt.Fprintf(w, "would finish     %s of segments released from quarantine: their records cannot be read, and finishing the segment deletes (--archive: archives) them with it; to keep what can be read of them: dlqdump verify %s --salvage DIR\n",
			plural(rep.ReleasedDamagedBlocks, "damaged block"), l.raw)
	}
	if rep.NoKeySegments > 0 {
		fmt.Fprintf(w, "no key for       %s (encrypted: would be left in place)\n", plural(rep.NoKeySegments, "segment"))
	}
	if rep.OtherVersionSegments > 0 {
		fmt.Fprintf(w, "other version    %s (a filtered restore leaves them in place: among the records left)\n", plural(rep.OtherVersionSegments, "segment"))
	}
	if len(rep.ByReason) > 0 {
		fmt.Fprintln(w, "by reason:")
		return reasonRows(rep.ByReason).write(w)
	}
	return nil
}

func (a *app) printReport(l *location, to string, rep *dlqdump.Report, hd *httpDest) {
	if a.quiet {
		return
	}
	dest := "stdout"
	if to != "" {
		dest = to
	}
	msg := fmt.Sprintf("restored %s (%s) from %s to %s; %s completed", plural(rep.Delivered, "record"), humanBytes(rep.Bytes), l, dest, plural(rep.Segments, "segment"))
	if hd != nil {
		if n := hd.retries.Load(); n > 0 {
			msg += fmt.Sprintf(", %s", plural(n, "retry"))
		}
	}
	var b bytes.Buffer
	b.WriteString(msg)
	if rep.Skipped > 0 {
		fmt.Fprintf(&b, "\nleft %s not selected by the filters", plural(rep.Skipped, "record"))
	}
	if rep.Quarantined > 0 || rep.QuarantinedSegments > 0 {
		fmt.Fprintf(&b, "\nquarantined %s", plural(rep.Quarantined, "record"))
		if rep.QuarantinedSegments > 0 {
			fmt.Fprintf(&b, " (%s moved whole)", plural(rep.QuarantinedSegments, "segment"))
		}
	}
	if rep.DamagedBlocks > 0 {
		fmt.Fprintf(&b, "\nskipped %s (run dlqdump verify)", plural(rep.DamagedBlocks, "damaged block"))
	}
	if rep.ReleasedDamagedBlocks > 0 {
		fmt.Fprintf(&b, "\nfinished %s of segments released from quarantine with them (their records could not be read)", plural(rep.ReleasedDamagedBlocks, "damaged block"))
	}
	if rep.NoKeySegments > 0 {
		fmt.Fprintf(&b, "\nleft %s in place: encrypted, and no identity given unwraps their keys", plural(rep.NoKeySegments, "segment"))
	}
	if rep.OtherVersionSegments > 0 {
		fmt.Fprintf(&b, "\nleft %s of another version in place (a restore without filters quarantines them)", plural(rep.OtherVersionSegments, "segment"))
	}
	if len(rep.ByReason) > 0 {
		b.WriteString("\ndelivered by reason:\n")
		_ = reasonRows(rep.ByReason).write(&b)
	}
	a.printErr(strings.TrimSuffix(b.String(), "\n"))
}

// stdoutDest writes delivered records to stdout as JSON lines. A failed
// write cancels the pass, so that nothing more is taken from the dump.
type stdoutDest struct {
	w      io.Writer
	cancel context.CancelFunc
	bar    *progress

	mu     sync.Mutex
	buf    bytes.Buffer
	failed error
}

type deliveredJSON struct {
	Headers       map[string]string `json:"headers"`
	Payload       any               `json:"payload"`
	PayloadBase64 bool              `json:"payload_base64,omitempty"`
}

// Enqueue writes one record; it implements the Restorer's destination.
func (d *stdoutDest) Enqueue(x any) error {
	payload, headers, err := unpack(x)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failed != nil {
		return d.failed
	}
	j := deliveredJSON{Headers: headers}
	j.Payload, j.PayloadBase64 = inspect.PayloadJSON(payload)
	d.buf.Reset()
	if err := jsonLine(&d.buf, j); err != nil {
		return err
	}
	if _, err := d.w.Write(d.buf.Bytes()); err != nil {
		d.failed = err
		d.cancel()
		return err
	}
	d.bar.add(1)
	return nil
}

// unpack returns the payload and headers of what the Restorer delivers:
// an *Envelope around the bytes decoder.Fallthrough returns.
func unpack(x any) ([]byte, map[string]string, error) {
	env, ok := x.(*dlqdump.Envelope)
	if !ok {
		return nil, nil, fmt.Errorf("dlqdump: unexpected item %T", x)
	}
	p, ok := env.Item.([]byte)
	if !ok {
		return nil, nil, fmt.Errorf("dlqdump: unexpected payload %T", env.Item)
	}
	h := map[string]string(env.Headers)
	if h == nil {
		h = map[string]string{}
	}
	return p, h, nil
}
