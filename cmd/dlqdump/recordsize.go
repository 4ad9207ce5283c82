package main

import (
	"fmt"

	"github.com/dlqdump/dlqdump"
	"github.com/spf13/pflag"
)

// recordSize is --max-record-size: the largest record the commands that
// restore (restore, replay, discard, prune, job run) read, their Restorers'
// Config.MaxRecordSize. A dump whose Queue allows larger records
// (Config.MaxRecordSize on the dumping side) is restored with the same
// value; a segment holding a larger block is quarantined (too_large), never
// read whole into memory.
type recordSize struct{ size dlqdump.MemorySize }

// defaultRecordSize is --max-record-size's default, Config.MaxRecordSize's.
const defaultRecordSize = 8 * dlqdump.Megabyte

func (s *recordSize) String() string {
	if s.size == 0 {
		return defaultRecordSize.String()
	}
	return s.size.String()
}

func (s *recordSize) Set(v string) error {
	n, err := dlqdump.ParseMemorySize(v)
	switch {
	case err != nil:
		return err
	case n <= 0:
		return fmt.Errorf("%q: want a size above 0, such as 16MiB", v)
	}
	s.size = n
	return nil
}

func (s *recordSize) Type() string { return "size" }

// register defines --max-record-size on fl.
func (s *recordSize) register(fl *pflag.FlagSet) {
	fl.Var(s, "max-record-size", "largest record restore, replay, discard, prune and job run read (the dumping Queue's MaxRecordSize); a segment with a larger block is quarantined as too_large; at most 64MiB")
}
