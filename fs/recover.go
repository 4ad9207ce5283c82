package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/dlqdump/dlqdump/segment"
)

// Recover finds temporary files whose writer is gone (their lock is free),
// seals their intact blocks and publishes them. A file with damage in the
// middle has its intact records copied into a new segment and is itself moved
// to the quarantine directory with the reason; a file with no records is
// removed. It returns the names of the published segments.
func (w *Writer) Recover(ctx context.Context) ([]string, error) {
	dir, err := w.dir()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("dlqdump: fs: list %s: %w", dir, err)
	}
	var published []string
	var errs []error
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(n, ".") || !strings.HasSuffix(n, segment.Ext+openSuffix) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return published, err
		}
		name := strings.TrimSuffix(n[1:], openSuffix)
		pub, err := w.recoverFile(dir, filepath.Join(dir, n), name)
		if err != nil {
			errs = append(errs, fmt.Errorf("recover %s: %w", n, err))
			continue
		}
		if pub != "" {
			published = append(published, pub)
		}
	}
	return published, errors.Join(errs...)
}

// recoverFile recovers one temporary file and returns the name of the segment
// it published: name, a new name when salvaged, or "" for none.
func (w *Writer) recoverFile(dir, path, name string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", nil // committed meanwhile
		}
		return "", err
	}
	defer f.Close()
	if locked, err := tryLock(f); err != nil || !locked {
		w.logger().Debug("segment is open by a live writer; not recovering it", slog.String("segment", name))
		return "", err
	}
	if !sameFile(f, path) {
		return "", nil // renamed by its writer before we locked it
	}
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	pub, _, err := w.publishIntact(dir, f, path, name, st.Size(), "recover", "left open")
	return pub, err
}

// publishIntact publishes the intact records of the segment file at path,
// open as f with its lock held, under name, and returns the name it
// published ("" for none) and how many records that segment holds: sealed
// as it is when intact; cut back to its intact prefix and sealed; or, with
// intact blocks after damage, its intact records copied into a new segment
// (a new name) and the file moved to quarantine. A file with a damaged header
// is moved to quarantine, one with no intact block removed. why starts the
// quarantine reason ("recover"), what says in the logs what the file is
// ("left open").
func (w *Writer) publishIntact(dir string, f *os.File, path, name string, size int64, why, what string) (string, uint64, error) {
	log := w.logger().With(slog.String("segment", name), slog.String("found", what))
	if size < segment.HeaderSize {
		log.Info("removing a segment with no records", slog.Int64("bytes", size))
		return "", 0, removeSynced(dir, path)
	}
	res, err := segment.Scan(f, size, &segment.ReaderOptions{Name: name})
	if err != nil {
		var ce *segment.CorruptError
		if !errors.As(err, &ce) {
			return "", 0, err
		}
		log.Warn("segment has a damaged header; moved to quarantine", slog.Any("error", err))
		return "", 0, moveAside(dir, w.asideDir(), path, name, why+": "+err.Error(), w.perm())
	}
	if res.Damage != nil && intactAfter(f, size, res.End, name) {
		if res.Header.Encrypted {
			// Its records cannot be copied without its key: kept whole,
			// every intact block with it, to be salvaged with the key.
			log.Warn("damaged encrypted segment with intact blocks after the damage; moved to quarantine whole", slog.Any("damage", res.Damage))
			return "", 0, moveAside(dir, w.asideDir(), path, name, why+": damaged, with intact blocks after the damage; encrypted, so kept whole: salvage it with its key (dlqdump verify --salvage DIR --identity FILE): "+res.Damage.Error(), w.perm())
		}
		return w.salvage(dir, f, path, name, size, res, why)
	}
	if len(res.Blocks) == 0 {
		log.Info("removing a segment with no intact records", slog.Any("damage", res.Damage))
		return "", 0, removeSynced(dir, path)
	}
	if !res.Sealed || res.Damage != nil {
		if err := f.Truncate(res.End); err != nil {
			return "", 0, err
		}
		if err := segment.Seal(io.NewOffsetWriter(f, res.End), res); err != nil {
			return "", 0, err
		}
	}
	if err := datasync(f); err != nil {
		return "", 0, err
	}
	if err := renameNoReplace(path, filepath.Join(dir, name)); err != nil {
		return "", 0, err
	}
	log.Info("sealed and published a segment", slog.Uint64("records", res.Records), slog.Any("damage", res.Damage))
	return name, res.Records, syncDir(dir)
}

// intactAfter reports whether an intact block follows offset end.
func intactAfter(f *os.File, size, end int64, name string) bool {
	r, err := segment.NewReader(f, size, &segment.ReaderOptions{Name: name})
	if err != nil || r.Seek(segment.Position{Offset: end}) != nil {
		return false
	}
	next := r.NextBlock
	if r.KeyError() != nil {
		next = r.VerifyBlock // encrypted: checksums only, no key here
	}
	for {
		_, err := next()
		if err == nil {
			return true
		}
		var ce *segment.CorruptError
		if !errors.As(err, &ce) {
			return false
		}
	}
}

// salvage copies every intact record of a damaged file into a new segment
// with the same header, publishes it and quarantines the damaged file.
func (w *Writer) salvage(dir string, f *os.File, path, name string, size int64, res *segment.ScanResult, why string) (string, uint64, error) {
	r, err := segment.NewReader(f, size, &segment.ReaderOptions{Name: name})
	if err != nil {
		return "", 0, err
	}
	// The copy gets a name of its own: the original keeps its name in
	// quarantine.
	hdr := res.Header
	hdr.ID = segment.NewID(hdr.Created)
	hdr.CopyOf = segment.Origin{}
	newName := segment.FileName(hdr.Created, hdr.ID)
	sw, err := w.Create(context.Background(), newName)
	if err != nil {
		return "", 0, err
	}
	out, err := segment.NewWriter(sw, hdr, nil)
	if err != nil {
		_ = sw.Abort()
		return "", 0, err
	}
	var copied, damaged int
	var firstDamage error
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var ce *segment.CorruptError
			if !errors.As(err, &ce) {
				_ = sw.Abort()
				return "", 0, err
			}
			damaged++
			if firstDamage == nil {
				firstDamage = err
			}
			continue // the damage is reported below and the file kept
		}
		// Records after a damaged block move to other sequence
		// numbers: each keeps its ID in a header.
		if err := out.CopyKeepID(&res.Header, &rec, nil); err != nil {
			_ = sw.Abort()
			return "", 0, err
		}
		copied++
	}
	if err := out.Close(); err != nil {
		_ = sw.Abort()
		return "", 0, err
	}
	// The damaged original must leave the temporary name before the salvaged
	// copy takes the final one, so a crash in between loses nothing.
	reason := fmt.Sprintf("%s: %d damaged blocks (first: %v); %d intact records copied into %s", why, damaged, firstDamage, copied, newName)
	if err := moveAside(dir, w.asideDir(), path, name, reason, w.perm()); err != nil {
		_ = sw.Abort()
		return "", 0, err
	}
	if err := sw.Commit(context.Background()); err != nil {
		return "", 0, err
	}
	w.logger().Warn("salvaged a damaged segment", slog.String("segment", name), slog.String("copy", newName), slog.Int("records", copied), slog.Int("damaged_blocks", damaged), slog.String("during", why))
	return newName, uint64(copied), nil
}

func removeSynced(dir, path string) error {
	if err := os.Remove(path); err != nil {
		return err
	}
	return syncDir(dir)
}
