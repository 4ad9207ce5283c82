package fs

import (
	"context"
	"errors"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// TablesDir holds the tables of records (sink.Tables): DIR/.tables/NAME/,
// one file per record, as the claim records are kept.
const TablesDir = ".tables"

// Table returns a table of records (sink.Tables), kept and changed as the
// claim records are: each record locked alone, changed by compare-and-swap.
func (r *Reader) Table(name string) (sink.Records, error) {
	if err := sink.CheckTableName(name); err != nil {
		return nil, err
	}
	return &table{r: r, sp: space{sub: filepath.Join(TablesDir, name), check: sink.CheckKey}}, nil
}

type table struct {
	r  *Reader
	sp space
}

func (t *table) ReadRecord(ctx context.Context, key string) ([]byte, string, error) {
	return t.r.readRecord(ctx, t.sp, key)
}

func (t *table) WriteRecord(ctx context.Context, key string, data []byte, ifVersion string) (string, error) {
	return t.r.writeRecord(ctx, t.sp, key, data, ifVersion)
}

func (t *table) DeleteRecord(ctx context.Context, key, ifVersion string) error {
	_, err := t.r.change(ctx, t.sp, key, nil, ifVersion)
	return err
}

func (t *table) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	return t.r.recordNames(ctx, t.sp)
}

// Stamp returns the modification time of the table's directory, which a
// record added or removed changes (sink.Stamper); "none" while there is no
// directory, and "" while the time is within stampGrain of now: a file
// system keeps it to its clock's tick (a few milliseconds), so a record
// added in the same tick leaves it as it was.
func (t *table) Stamp(ctx context.Context) (string, error) {
	dir, err := t.r.recordsDir(t.sp)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "none", nil
	}
	if err != nil {
		return "", err
	}
	if time.Since(fi.ModTime()) < stampGrain {
		return "", nil
	}
	return strconv.FormatInt(fi.ModTime().UnixNano(), 10), nil
}

// stampGrain bounds the tick of a file system's timestamps.
const stampGrain = 50 * time.Millisecond
