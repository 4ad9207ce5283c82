// Package fs stores dlqdump segments in a local directory.
//
// A Writer publishes each segment atomically: it is written to a hidden
// temporary file (".NAME.open", locked while its writer lives), synced, renamed
// to NAME and the directory synced, so a reader never sees half a segment.
// Names sort by creation time and carry 64 random bits, so several processes
// can write one directory. Recover, called by dlqdump.NewQueue, seals and
// publishes the intact blocks of any temporary file whose writer died.
//
// A Reader restores from the same directory. It stores what the Restorer's
// claim protocol needs (package sink): one small record per segment name,
// changed by compare-and-swap under an flock on the record's own file, which
// a writer breaks when it stays held (its holder stopped), so any number of
// restorers, in any number of processes on the host, share a directory, and
// a stopped one blocks nothing but its own record, and that for a second.
//
// The directory layout:
//
//	DIR/*.dlq                     segments ready to restore
//	DIR/.*.dlq.open               segments a Queue is writing (published by Recover if it dies)
//	DIR/.*.dlq.part               segments a restorer or a copy is writing (removed if it dies)
//	DIR/.claims/NAME.dlq.claim    the record of a segment: its restore claim and progress (JSON, in one of two slots)
//	DIR/.claims/NAME.dlq.claim@ID its successors, made when a lock was broken (rare)
//	DIR/quarantine/*.dlq          segments moved aside
//	DIR/quarantine/*.dlq.reason   why, one text file per segment when known
//	DIR/archive/*.dlq             restored segments, when archiving is on
//	DIR/.staging/TOKEN-NAME.dlq   segments staged on behalf of a claim, published by moving them into an area
//	DIR/.tables/TABLE/KEY.claim   the records of a table (sink.Tables): restore jobs
//
// A record is written by dlqdump's claim protocol (see the dlqdump package
// documentation for its fields); a record that does not parse is treated as
// a live claim of unknown age, taken over once it stays unchanged for a
// lease.
package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dlqdump/dlqdump/segment"
)

// Subdirectories of a dump directory.
const (
	QuarantineDir = "quarantine"
	ArchiveDir    = "archive"
	ClaimsDir     = ".claims"
	// StagingDir holds the segments a restorer or a command stages on
	// behalf of a claim before its claim record lets them be published.
	StagingDir = ".staging"
)

const (
	openSuffix   = ".open"
	reasonSuffix = ".reason"
	defaultPerm  = 0o640
)

// ErrName means a segment name is not a plain file name ending in ".dlq".
var ErrName = errors.New("dlqdump: fs: bad segment name")

func checkName(name string) error {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, segment.Ext) {
		return fmt.Errorf("%w: %q", ErrName, name)
	}
	return nil
}

func tempName(name string) string { return "." + name + openSuffix }

// syncDir makes the directory's entries (creations, renames) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("dlqdump: fs: sync directory %s: %w", dir, err)
	}
	return nil
}

// writeFileAtomic writes data to path through a synced temporary file.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = datasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// moveAside moves the file at path into dir/sub as name, with a .reason file
// beside it saying why.
func moveAside(dir, sub, path, name, reason string, perm os.FileMode) error {
	to := filepath.Join(dir, sub)
	if err := os.MkdirAll(to, 0o750); err != nil {
		return fmt.Errorf("dlqdump: fs: %w", err)
	}
	if reason != "" {
		if err := writeFileAtomic(filepath.Join(to, name+reasonSuffix), []byte(reason+"\n"), perm); err != nil {
			return fmt.Errorf("dlqdump: fs: write reason for %s: %w", name, err)
		}
	}
	if err := renameNoReplace(path, filepath.Join(to, name)); err != nil {
		return fmt.Errorf("dlqdump: fs: move %s to %s: %w", path, sub, err)
	}
	if err := syncDir(to); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}
