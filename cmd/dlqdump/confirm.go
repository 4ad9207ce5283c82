package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// confirmStdoutRestore: dlqdump restore without --to writes the records to
// stdout and deletes them from the dump. Redirected (to a file, a pipe),
// that is what was asked for; on a terminal, where it may be taken for
// dlqdump cat, it says so and asks, on stdin when that is a terminal too,
// and otherwise does not start. It returns nil to go on.
func (a *app) confirmStdoutRestore(l *location, stdin io.Reader) error {
	if !isTerminal(a.stdout) {
		return nil
	}
	a.printErr(fmt.Sprintf("dlqdump: restore without --to prints the records on this terminal and deletes them from %s; "+
		"to look at them and keep them, use dlqdump cat %s", l.raw, l.raw))
	if !isTerminal(stdin) {
		return usageErrorf("not restoring to a terminal without an answer: give --to URL, or redirect stdout (dlqdump restore %s > records.jsonl)", l.raw)
	}
	a.printErr("restore them to this terminal, deleting them from the dump? [y/N] ")
	line, _ := bufio.NewReader(stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return withCode(exitError, fmt.Errorf("nothing was restored"))
}
