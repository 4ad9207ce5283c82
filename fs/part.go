package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// partSuffix ends the temporary file of a segment made by Reader.Create: the
// records a Restorer sets aside, a copy made by the dlqdump command. Unlike a
// Queue's ".open" file, a ".part" file whose writer is gone is removed, never
// published: what it held is still in its source, and is written again.
const partSuffix = ".part"

func partName(name string) string { return "." + name + partSuffix }

// Create starts a new segment in an area's directory, in a locked temporary
// file (".NAME.part") published on Commit by a rename that never replaces a
// file: a segment of that name already there makes Commit fail with an error
// wrapping sink.ErrExist. A temporary file of the same name left by a writer
// that is gone is removed first; in the staging area, where every claim
// stages under names of its own, every one such is.
func (r *Reader) Create(ctx context.Context, area sink.Area, name string) (sink.SegmentWriter, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	dir, err := r.areaDir(area)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("dlqdump: fs: create directory: %w", err)
	}
	if area == sink.AreaStaging {
		if err := removeStaleParts(ctx, dir, r.logger()); err != nil {
			return nil, err
		}
	}
	tmp := filepath.Join(dir, partName(name))
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, r.perm())
		if errors.Is(err, os.ErrExist) && attempt < 3 {
			if removed, rerr := removeIfStale(tmp); rerr != nil || !removed {
				if rerr == nil {
					rerr = errors.New("another writer is writing it")
				}
				return nil, fmt.Errorf("dlqdump: fs: create %s: %w", tmp, rerr)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("dlqdump: fs: create segment: %w", err)
		}
		locked, err := tryLock(f)
		if err == nil && locked && sameFile(f, tmp) {
			return &partFile{file{f: f, dir: dir, tmp: tmp, final: filepath.Join(dir, name)}}, nil
		}
		// Removed (by a Recover that found it unlocked) between the
		// create and the lock: make it again.
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("dlqdump: fs: lock %s: %w", tmp, err)
		}
		if attempt >= 3 {
			return nil, fmt.Errorf("dlqdump: fs: create %s: removed by another process again and again", tmp)
		}
	}
}

// partFile is a segment made by Reader.Create.
type partFile struct{ file }

// Commit publishes the segment; a segment of that name already there is an
// error wrapping sink.ErrExist.
func (p *partFile) Commit(ctx context.Context) error {
	err := p.file.Commit(ctx)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w: %s: %w", sink.ErrExist, p.final, err)
	}
	return err
}

// Abort removes the temporary file, unless it was published.
func (p *partFile) Abort() error {
	if p.committed {
		return nil
	}
	return p.file.Abort()
}

// removeIfStale removes the temporary file at path when no live writer holds
// its lock; removed says whether it is gone.
func removeIfStale(path string) (removed bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	locked, err := tryLock(f)
	if err != nil || !locked {
		return false, err
	}
	if !sameFile(f, path) {
		return true, nil // replaced meanwhile: try again
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// removeStaleParts removes the ".part" files in dir whose writer is gone.
func removeStaleParts(ctx context.Context, dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dlqdump: fs: list %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(n, ".") || !strings.HasSuffix(n, segment.Ext+partSuffix) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		path := filepath.Join(dir, n)
		removed, err := removeIfStale(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("dlqdump: fs: remove %s: %w", path, err))
			continue
		}
		if removed {
			log.Info("removed a segment left half written by a restorer or a copy (its records are still in their source)", slog.String("path", path))
		}
	}
	return errors.Join(errs...)
}
