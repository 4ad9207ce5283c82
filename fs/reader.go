package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/dlqdump/dlqdump/sink"
)

// Reader restores segments from a directory written by Writer. Use it as
// dlqdump.Config.Reader:
//
//	&fs.Reader{Directory: "/var/lib/app/dlq"}
//
// Several Readers, in one process or many, may share a directory: the claim
// records that keep them apart are files in DIR/.claims, each changed under
// an advisory lock (flock) of its own, which a writer breaks when it stays
// held for a second (records.go). See the package documentation for the
// directory layout.
type Reader struct {
	// Directory holds the segments. Required.
	Directory string
	// Perm is the permission of new files (segments, records, reasons).
	// Default 0640.
	Perm os.FileMode
	// Logger receives reports about recovered segments. Default: discard.
	Logger *slog.Logger

	syncs recordSyncs // when each record was last synced
}

var (
	_ sink.Reader    = (*Reader)(nil)
	_ sink.Recoverer = (*Reader)(nil)
)

func (r *Reader) perm() os.FileMode {
	if r.Perm == 0 {
		return defaultPerm
	}
	return r.Perm
}

func (r *Reader) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// writer returns a Writer publishing into dir.
func (r *Reader) writer(dir string) *Writer {
	return &Writer{Directory: dir, Perm: r.Perm, Logger: r.Logger}
}

// areaDir returns the directory holding an area's segments.
func (r *Reader) areaDir(a sink.Area) (string, error) {
	if r.Directory == "" {
		return "", fmt.Errorf("%w: fs.Reader.Directory: required", sink.ErrConfig)
	}
	switch a {
	case sink.AreaReady:
		return r.Directory, nil
	case sink.AreaQuarantine:
		return filepath.Join(r.Directory, QuarantineDir), nil
	case sink.AreaArchive:
		return filepath.Join(r.Directory, ArchiveDir), nil
	case sink.AreaStaging:
		return filepath.Join(r.Directory, StagingDir), nil
	}
	return "", fmt.Errorf("dlqdump: fs: unknown area %v", a)
}

func notFound(a sink.Area, name string) error {
	return fmt.Errorf("%w: %s segment %s", sink.ErrNotFound, a, name)
}

// isSegment reports whether path is a regular file.
func isSegment(path string) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("dlqdump: fs: %w", err)
	}
	return fi.Mode().IsRegular(), nil
}

// List returns the segments of an area sorted by name, oldest first. It reads
// the area's directory once per call; every segment costs one lstat. A
// missing directory is an empty area. Quarantined segments carry the text of
// their .reason file.
func (r *Reader) List(ctx context.Context, area sink.Area) iter.Seq2[sink.Info, error] {
	return func(yield func(sink.Info, error) bool) {
		dir, err := r.areaDir(area)
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			yield(sink.Info{}, err)
			return
		}
		entries, err := os.ReadDir(dir) // sorted by name
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err != nil {
			yield(sink.Info{}, fmt.Errorf("dlqdump: fs: list %s: %w", dir, err))
			return
		}
		reasons := map[string]bool{}
		if area == sink.AreaQuarantine {
			for _, e := range entries {
				if n, ok := strings.CutSuffix(e.Name(), reasonSuffix); ok && e.Type().IsRegular() {
					reasons[n] = true
				}
			}
		}
		for _, e := range entries {
			name := e.Name()
			if !e.Type().IsRegular() || checkName(name) != nil {
				continue // temporary, hidden and reason files, directories
			}
			if err := ctx.Err(); err != nil {
				yield(sink.Info{}, err)
				return
			}
			fi, err := e.Info()
			if errors.Is(err, os.ErrNotExist) {
				continue // moved or deleted meanwhile
			}
			if err != nil {
				yield(sink.Info{}, fmt.Errorf("dlqdump: fs: list %s: %w", dir, err))
				return
			}
			si := sink.Info{Name: name, Area: area, Size: fi.Size(), Modified: fi.ModTime()}
			if reasons[name] {
				si.Reason = readReason(filepath.Join(dir, name+reasonSuffix))
			}
			if !yield(si, nil) {
				return
			}
		}
	}
}

// readReason returns the reason stored at path, "" if none.
func readReason(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// Open opens a segment for reading. A missing segment is an error wrapping
// sink.ErrNotFound.
func (r *Reader) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
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
	f, err := os.Open(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, notFound(area, name)
	}
	if err != nil {
		return nil, fmt.Errorf("dlqdump: fs: open: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("dlqdump: fs: open: %w", err)
	}
	if !st.Mode().IsRegular() {
		_ = f.Close()
		return nil, notFound(area, name)
	}
	return &segmentFile{f: f, size: st.Size()}, nil
}

// segmentFile is an open segment.
type segmentFile struct {
	f    *os.File
	size int64
}

func (s *segmentFile) ReadAt(p []byte, off int64) (int, error) { return s.f.ReadAt(p, off) }
func (s *segmentFile) Size() int64                             { return s.size }
func (s *segmentFile) Close() error                            { return s.f.Close() }

// Move moves a segment from one area to another with a rename that never
// replaces a file, and syncs both directories. reason is stored beside a
// segment moved to quarantine (an empty reason removes any stale one) and
// removed when it leaves quarantine; moving a quarantined segment to
// quarantine only sets its reason. A missing segment is an error wrapping
// sink.ErrNotFound; a segment of that name already in the destination, with
// other bytes, is an error wrapping sink.ErrExist (with the same bytes, the
// source is removed: an earlier Move got that far).
func (r *Reader) Move(ctx context.Context, name string, from, to sink.Area, reason string) error {
	return r.move(ctx, from, name, to, name, reason)
}

// Unstage moves a staged segment into an area under its own name, as Move
// moves a segment (see sink.Reader).
func (r *Reader) Unstage(ctx context.Context, staged, name string, to sink.Area, reason string) error {
	if to == sink.AreaStaging {
		return fmt.Errorf("dlqdump: fs: unstage %s into the staging area", staged)
	}
	return r.move(ctx, sink.AreaStaging, staged, to, name, reason)
}

// move renames segment name of area from to segment newName of area to.
func (r *Reader) move(ctx context.Context, from sink.Area, name string, to sink.Area, newName, reason string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := checkName(newName); err != nil {
		return err
	}
	fromDir, err := r.areaDir(from)
	if err != nil {
		return err
	}
	toDir, err := r.areaDir(to)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	src, dst := filepath.Join(fromDir, name), filepath.Join(toDir, newName)
	ok, err := isSegment(src)
	if err != nil {
		return err
	}
	if !ok {
		return notFound(from, name)
	}
	reasonPath := filepath.Join(toDir, newName+reasonSuffix)
	if src == dst {
		if to == sink.AreaQuarantine && reason != "" {
			return writeFileAtomic(reasonPath, []byte(reason+"\n"), r.perm())
		}
		return nil
	}
	if err := os.MkdirAll(toDir, 0o750); err != nil {
		return fmt.Errorf("dlqdump: fs: %w", err)
	}
	// A segment already at the destination keeps its reason, whether this
	// Move is refused or finishes an earlier one: the reason is written only
	// for a segment about to arrive. (One that appears there meanwhile, when
	// two writers publish one name at once, may get this Move's reason.)
	there, err := isSegment(dst)
	if err != nil {
		return err
	}
	if there {
		err = &os.LinkError{Op: "rename", Old: src, New: dst, Err: os.ErrExist}
	} else {
		if to == sink.AreaQuarantine {
			if reason != "" {
				if err := writeFileAtomic(reasonPath, []byte(reason+"\n"), r.perm()); err != nil {
					return fmt.Errorf("dlqdump: fs: write reason for %s: %w", newName, err)
				}
			} else if err := removeIfExists(reasonPath); err != nil {
				return err
			}
		}
		err = renameNoReplace(src, dst)
	}
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return notFound(from, name)
		case errors.Is(err, os.ErrExist):
			if same, _ := sameBytes(src, dst); !same {
				return fmt.Errorf("dlqdump: fs: move %s from %s to %s: %w", name, from, to, sink.ErrExist)
			}
			// The same segment under both names (a link-and-remove
			// move that stopped halfway): finish it.
			if err := os.Remove(src); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("dlqdump: fs: move %s: %w", name, err)
			}
		default:
			return fmt.Errorf("dlqdump: fs: move %s from %s to %s: %w", name, from, to, err)
		}
	}
	if from == sink.AreaQuarantine {
		if err := removeIfExists(filepath.Join(fromDir, name+reasonSuffix)); err != nil {
			return err
		}
	}
	if err := syncDir(toDir); err != nil {
		return err
	}
	return syncDir(fromDir)
}

// sameBytes reports whether two files are one file or hold the same bytes.
func sameBytes(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	if os.SameFile(fa, fb) {
		return true, nil
	}
	if fa.Size() != fb.Size() {
		return false, nil
	}
	x, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer x.Close()
	y, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer y.Close()
	bx, by := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		n, errx := io.ReadFull(x, bx)
		m, erry := io.ReadFull(y, by)
		if n != m || !bytes.Equal(bx[:n], by[:m]) {
			return false, nil
		}
		if errx != nil || erry != nil {
			return errors.Is(errx, io.EOF) || errors.Is(errx, io.ErrUnexpectedEOF), nil
		}
	}
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("dlqdump: fs: %w", err)
	}
	return nil
}

// Delete removes a segment, with its reason file, and syncs the directory. A
// missing segment is an error wrapping sink.ErrNotFound.
func (r *Reader) Delete(ctx context.Context, area sink.Area, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	dir, err := r.areaDir(area)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	path := filepath.Join(dir, name)
	if ok, err := isSegment(path); err != nil || !ok {
		if err == nil {
			err = notFound(area, name)
		}
		return err
	}
	if err := os.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return notFound(area, name)
		}
		return fmt.Errorf("dlqdump: fs: delete: %w", err)
	}
	if area == sink.AreaQuarantine {
		if err := removeIfExists(path + reasonSuffix); err != nil {
			return err
		}
	}
	return syncDir(dir)
}

// Recover publishes the segments that crashed Queues left open in the ready
// directory, like Writer.Recover, and removes what crashed restorers and
// copies left half written (temporary files whose writer is gone: their
// records are still in their source, so nothing is lost). It returns the
// names of the published segments. A missing directory has nothing to
// recover.
func (r *Reader) Recover(ctx context.Context) ([]string, error) {
	if r.Directory == "" {
		return nil, fmt.Errorf("%w: fs.Reader.Directory: required", sink.ErrConfig)
	}
	if _, err := os.Stat(r.Directory); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var names []string
	var errs []error
	// Quarantine holds no Queue's segments, but older versions' restorers
	// wrote quarantined records there the way a Queue writes.
	quarantine := r.writer(filepath.Join(r.Directory, QuarantineDir))
	quarantine.aside = "." // damaged files are already in quarantine
	for _, w := range []*Writer{r.writer(r.Directory), quarantine} {
		if _, err := os.Stat(w.Directory); errors.Is(err, os.ErrNotExist) {
			continue
		}
		n, err := w.Recover(ctx)
		names = append(names, n...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	for a := sink.AreaReady; a <= sink.AreaStaging; a++ {
		dir, _ := r.areaDir(a)
		if err := removeStaleParts(ctx, dir, r.logger()); err != nil {
			errs = append(errs, err)
		}
	}
	return names, errors.Join(errs...)
}
