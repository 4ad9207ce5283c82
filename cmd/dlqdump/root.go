package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump/internal/claims"
)

// Exit codes.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitDamage      = 3
	exitUndelivered = 4
	exitUnavailable = 5
	exitInterrupted = 130
)

const exitCodesHelp = `Exit status:
  0    success
  1    error (the message names the segment and offset when there is one)
  2    usage: bad command, argument or flag
  3    damage found: verify found a damaged segment (ls, stat and cat too,
       after printing everything intact)
  4    restore: some records were not delivered (quarantined or in damaged
       blocks); they are kept in the quarantine area
  5    restore --to: the endpoint was unavailable (connection refused,
       timeouts, 5xx, 429): the restore stopped, the records not delivered
       stay ready
  130  interrupted (SIGINT or SIGTERM)
When several apply, 1 wins over 3, 4 and 5.`

const locationHelp = `Locations:
  DIR                    a dump directory (the Directory of an fs.Writer)
  s3://BUCKET/PREFIX     an S3 prefix (the Bucket and Prefix of an s3.Writer)

S3 settings come from the standard AWS environment (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL,
AWS_PROFILE, shared config files), overridden by --s3-endpoint, --s3-region
and --s3-path-style. Path-style addressing is on by default when an endpoint
is set, off for AWS itself; without a region, us-east-1 is used.`

// exitErr is an error with the exit status it causes.
type exitErr struct {
	code int
	err  error
}

// Error returns the message of the underlying error.
func (e *exitErr) Error() string { return e.err.Error() }

// Unwrap returns the underlying error.
func (e *exitErr) Unwrap() error { return e.err }

// readOutcome is how a command that read segments ends: an error when some
// could not be read, exit status exitDamage when some were damaged (note
// says what that meant for the output), else nil.
func readOutcome(failed, damaged int, note string) error {
	switch {
	case failed > 0:
		return fmt.Errorf("%s could not be read", plural(failed, "segment"))
	case damaged > 0:
		return &exitErr{code: exitDamage, err: fmt.Errorf("%s damaged; %srun dlqdump verify", plural(damaged, "segment"), note)}
	}
	return nil
}

// usageErrorf returns a usage error (exit status 2).
func usageErrorf(format string, args ...any) error {
	return &exitErr{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// withCode attaches an exit status to err; nil stays nil.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	var e *exitErr
	if errors.As(err, &e) {
		return err
	}
	return &exitErr{code: code, err: err}
}

// silentExit ends the command with a status and no further message (the
// command already reported what went wrong).
type silentExit int

// Error returns "exit status N".
func (s silentExit) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// app is the state shared by the commands of one run.
type app struct {
	stdout io.Writer
	stderr io.Writer

	quiet    bool
	s3       s3Flags
	keyFlags keyFlags
	changes  changeFlags
	// recordSize is --max-record-size: every Restorer's MaxRecordSize.
	recordSize recordSize
	// logFailed is set when a change was made and its change log entry
	// could not be appended: the command exits 1.
	logFailed atomic.Bool

	// soft is cancelled by the first interrupt: commands stop at the next
	// segment or block. ctx is cancelled by the second: I/O stops at once.
	soft, ctx context.Context
	// stopping is what the first interrupt says the command does (by
	// default, it finishes the block or segment at hand).
	stopping atomic.Pointer[string]

	outMu sync.Mutex // serialises stderr between messages and the bar
	bar   *progress  // the bar being drawn, if any

	// lease is the lease of the claims this process takes (mv), and the
	// one it assumes for a damaged claim record (--lease, hidden).
	lease    time.Duration
	claimMu  sync.Mutex
	claimers map[*location]*claims.Claimer
}

// printErr prints a line on stderr, erasing the progress bar first (it is
// drawn again at its next tick).
func (a *app) printErr(line string) {
	a.outMu.Lock()
	defer a.outMu.Unlock()
	if a.bar != nil {
		a.bar.clearLocked()
	}
	io.WriteString(a.stderr, line+"\n")
}

// infof prints an informational message on stderr unless --quiet.
func (a *app) infof(format string, args ...any) {
	if a.quiet {
		return
	}
	a.printErr(fmt.Sprintf(format, args...))
}

// warnf prints a warning on stderr, even with --quiet.
func (a *app) warnf(format string, args ...any) {
	a.printErr(named(fmt.Sprintf(format, args...)))
}

// named returns a message for stderr that names the program once, at its
// start: the CLI's own messages get it here, while an error of the library
// carries it already, from the sentinel it wraps first (dlqdump: ...).
func named(msg string) string {
	// Errors that wrap several of the library's sentinels carry the name
	// once per sentinel: once is enough.
	msg = strings.ReplaceAll(msg, ": dlqdump: ", ": ")
	if strings.HasPrefix(msg, "dlqdump: ") {
		return msg
	}
	return "dlqdump: " + msg
}

// interrupted reports whether the user asked to stop.
func (a *app) interrupted() bool { return a.soft.Err() != nil }

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// newRoot builds the command tree.
func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "dlqdump",
		Short: "Inspect, verify, copy and restore dlqdump dead-letter dumps",
		Long: `dlqdump inspects, verifies, copies and restores the dead-letter dumps that
github.com/dlqdump/dlqdump writes: compressed, checksummed segments in a
directory or under an S3 prefix.

` + locationHelp + `

` + keysHelp + `

Progress bars are drawn on stderr for cp, mv, verify and restore when stderr
is a terminal, never into a pipe or file; --quiet turns them off together
with informational messages.

` + exitCodesHelp,
		Version:       buildVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Completion scripts are not worth a command here.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitErr{code: exitUsage, err: err}
	})
	pf := root.PersistentFlags()
	pf.BoolVarP(&a.quiet, "quiet", "q", false, "no progress bars and no informational messages")
	a.s3.register(pf)
	a.keyFlags.register(pf)
	a.changes.register(pf)
	a.recordSize.register(pf)
	root.AddCommand(
		newLsCmd(a),
		newStatCmd(a),
		newErrorsCmd(a),
		newCatCmd(a),
		newVerifyCmd(a),
		newRestoreCmd(a),
		newReplayCmd(a),
		newDiscardCmd(a),
		newCopyCmd(a, false),
		newCopyCmd(a, true),
		newQuarantineCmd(a),
		newPruneCmd(a),
		newRewrapCmd(a),
		newSummarizeCmd(a),
		newKeygenCmd(a),
		newJobCmd(a),
		newUICmd(a),
		newLogCmd(a),
	)
	return root
}

// run runs the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	hard, cancel := context.WithCancel(context.Background())
	defer cancel()
	soft, softCancel := context.WithCancel(hard)
	defer softCancel()
	a := &app{stdout: stdout, stderr: stderr, soft: soft, ctx: hard, lease: defaultLease}

	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	// A closed stdout (dlqdump cat | head) ends writes with EPIPE, which the
	// commands report, instead of killing the process mid-restore.
	signal.Ignore(syscall.SIGPIPE)
	defer signal.Stop(sigs)
	stopSignals := make(chan struct{})
	defer close(stopSignals)
	go func() {
		n := 0
		for {
			select {
			case <-sigs:
			case <-stopSignals:
				return
			}
			n++
			switch n {
			case 1:
				what := "finishing the block or segment at hand"
				if p := a.stopping.Load(); p != nil {
					what = *p
				}
				a.printErr("\ndlqdump: interrupted: " + what + " (interrupt again to stop at once)")
				softCancel()
			case 2:
				cancel()
			default:
				os.Exit(exitInterrupted)
			}
		}
	}()

	root := newRoot(a)
	if len(args) == 0 {
		fmt.Fprintf(stderr, "dlqdump COMMAND LOCATION [flags]: no command given\n\n%s", root.UsageString())
		return exitUsage
	}
	root.SetArgs(args)
	err := root.Execute()
	if err == nil && a.logFailed.Load() {
		return exitError
	}
	if err == nil {
		if a.interrupted() {
			return exitInterrupted
		}
		return exitOK
	}
	var se silentExit
	if errors.As(err, &se) {
		return int(se)
	}
	if errors.Is(err, syscall.EPIPE) {
		// The reader of stdout went away (dlqdump cat | head): not an
		// error of ours.
		return exitOK
	}
	code := exitUsage // errors not made by the commands come from parsing
	var e *exitErr
	if errors.As(err, &e) {
		code = e.code
	}
	if a.interrupted() && (errors.Is(err, context.Canceled) || code == exitError) {
		fmt.Fprintln(stderr, named(err.Error()))
		return exitInterrupted
	}
	fmt.Fprintln(stderr, named(err.Error()))
	if code == exitUsage {
		name := "dlqdump"
		if c, _, ferr := root.Find(args); ferr == nil && c != nil {
			name = c.CommandPath()
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
	}
	return code
}

// runE adapts a command function: errors it returns are errors (status 1)
// unless they carry another status.
func runE(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return withCode(exitError, f(cmd, args))
	}
}

// argsRange checks the number of positional arguments, naming what is
// expected.
func argsRange(min, max int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || max >= 0 && len(args) > max {
			return usageErrorf("%s: want %s, got %d argument(s)%s", strings.TrimPrefix(cmd.CommandPath(), "dlqdump "), what, len(args), quoteArgs(args))
		}
		return nil
	}
}

func quoteArgs(args []string) string {
	if len(args) == 0 {
		return ""
	}
	q := make([]string, len(args))
	for i, s := range args {
		q[i] = fmt.Sprintf("%q", s)
	}
	return ": " + strings.Join(q, " ")
}
