package fs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump"
)

// Reader restores segments from a directory written by Writer. Use it as
// dlqdump.Config.Reader:
//
//	&fs.Reader{Directory: "/var/lib/app/dlq"}
//
// Several Readers, in one process or many, may share a directory: claims are
// files in DIR/.claims guarded by advisory locks (flock), so exactly one
// restorer holds a live claim on a segment. See the package documentation for
// the directory layout and the claim file format.
type Reader struct {
	// Directory holds the segments. Required.
	Directory string
	// Perm is the permission of new files (segments, claims, reasons).
	// Default 0640.
	Perm os.FileMode
	// Logger receives reports about recovered segments and stale claims.
	// Default: discard.
	Logger *slog.Logger
}

var (
	_ dlqdump.Reader    = (*Reader)(nil)
	_ dlqdump.Recoverer = (*Reader)(nil)
)

const claimSuffix = ".claim"

// maxClaimSize bounds what is read of a claim file; this package writes a
// few hundred bytes.
const maxClaimSize = 64 << 10

// lockWait bounds how long an operation waits for the lock on a claim file,
// which is only ever held for a read and a small write.
var lockWait = 2 * time.Second

// errLockBusy means a claim file stayed locked for lockWait.
var errLockBusy = errors.New("dlqdump: fs: claim file locked by another restorer")

// errClaimEnded is returned by every method of a claim after Release,
// Complete or Quarantine succeeded on it.
var errClaimEnded = fmt.Errorf("dlqdump: fs: claim ended: %w", dlqdump.ErrClosed)

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
func (r *Reader) areaDir(a dlqdump.Area) (string, error) {
	if r.Directory == "" {
		return "", fmt.Errorf("%w: fs.Reader.Directory: required", dlqdump.ErrConfig)
	}
	switch a {
	case dlqdump.AreaReady:
		return r.Directory, nil
	case dlqdump.AreaQuarantine:
		return filepath.Join(r.Directory, QuarantineDir), nil
	case dlqdump.AreaArchive:
		return filepath.Join(r.Directory, ArchiveDir), nil
	}
	return "", fmt.Errorf("dlqdump: fs: unknown area %v", a)
}

func (r *Reader) claimPath(name string) string {
	return filepath.Join(r.Directory, ClaimsDir, name+claimSuffix)
}

func notFound(a dlqdump.Area, name string) error {
	return fmt.Errorf("%w: %s segment %s", dlqdump.ErrNotFound, a, name)
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
// the area's directory, and for ready segments the claims directory, once per
// call; every segment costs one lstat. A missing directory is an empty area.
// Ready segments with a claim file carry its ClaimInfo (an unreadable claim
// file counts as none); quarantined ones carry the text of their .reason file.
func (r *Reader) List(ctx context.Context, area dlqdump.Area) iter.Seq2[dlqdump.SegmentInfo, error] {
	return func(yield func(dlqdump.SegmentInfo, error) bool) {
		dir, err := r.areaDir(area)
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			yield(dlqdump.SegmentInfo{}, err)
			return
		}
		entries, err := os.ReadDir(dir) // sorted by name
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err != nil {
			yield(dlqdump.SegmentInfo{}, fmt.Errorf("dlqdump: fs: list %s: %w", dir, err))
			return
		}
		var claims, reasons map[string]bool
		switch area {
		case dlqdump.AreaReady:
			if claims, err = r.claimNames(); err != nil {
				yield(dlqdump.SegmentInfo{}, err)
				return
			}
		case dlqdump.AreaQuarantine:
			reasons = map[string]bool{}
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
				yield(dlqdump.SegmentInfo{}, err)
				return
			}
			fi, err := e.Info()
			if errors.Is(err, os.ErrNotExist) {
				continue // moved or deleted meanwhile
			}
			if err != nil {
				yield(dlqdump.SegmentInfo{}, fmt.Errorf("dlqdump: fs: list %s: %w", dir, err))
				return
			}
			si := dlqdump.SegmentInfo{Name: name, Area: area, Size: fi.Size(), Modified: fi.ModTime()}
			if claims[name] {
				si.Claim = r.claimInfo(ctx, name)
			}
			if reasons[name] {
				si.Reason = readReason(filepath.Join(dir, name+reasonSuffix))
			}
			if !yield(si, nil) {
				return
			}
		}
	}
}

// claimNames returns the names of the segments with a claim file.
func (r *Reader) claimNames() (map[string]bool, error) {
	dir := filepath.Join(r.Directory, ClaimsDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dlqdump: fs: list claims: %w", err)
	}
	m := make(map[string]bool, len(entries))
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), claimSuffix); ok && e.Type().IsRegular() {
			m[n] = true
		}
	}
	return m, nil
}

// claimInfo reads the claim on a segment without taking its lock. If what it
// reads does not parse, a write may be under way, so it reads again under the
// lock. It returns nil when there is no readable claim.
func (r *Reader) claimInfo(ctx context.Context, name string) *dlqdump.ClaimInfo {
	path := r.claimPath(name)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	c, ok := parseClaim(b)
	if !ok && len(b) > 0 {
		f, err := lockFile(ctx, path, false, 0)
		if err != nil {
			return nil
		}
		c, ok, err = readClaim(f)
		_ = f.Close()
		if err != nil {
			return nil
		}
	}
	if !ok {
		return nil
	}
	return &dlqdump.ClaimInfo{Owner: c.Owner, Expires: c.Expires, Checkpoint: c.Checkpoint.get()}
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
// dlqdump.ErrNotFound.
func (r *Reader) Open(ctx context.Context, area dlqdump.Area, name string) (dlqdump.SegmentFile, error) {
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

// Create starts a new segment in an area's directory, written like
// Writer.Create does: in a locked temporary file published on Commit.
func (r *Reader) Create(ctx context.Context, area dlqdump.Area, name string) (dlqdump.SegmentWriter, error) {
	dir, err := r.areaDir(area)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r.writer(dir).Create(ctx, name)
}

// Move moves a segment from one area to another with a rename, and syncs
// both directories. A ready segment with a live claim is not moved (an error
// wrapping dlqdump.ErrClaimed); a ready segment leaving its area loses its
// claim file, and with it its checkpoint. reason is stored beside a segment
// moved to quarantine (an empty reason removes any stale one) and removed
// when it leaves quarantine. A missing segment is an error wrapping
// dlqdump.ErrNotFound; a segment of that name already in the destination is
// an error wrapping os.ErrExist.
func (r *Reader) Move(ctx context.Context, name string, from, to dlqdump.Area, reason string) error {
	if err := checkName(name); err != nil {
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
	if from != dlqdump.AreaReady {
		return r.move(name, fromDir, toDir, from, to, reason)
	}
	// The claim file's lock keeps restorers from claiming the segment
	// while it moves.
	f, err := r.lockClaim(ctx, name, true)
	if err != nil {
		return busyIsClaimed(name, err)
	}
	defer f.Close()
	c, ok, err := readClaim(f)
	if err != nil {
		return err
	}
	if ok && time.Now().Before(c.Expires) {
		return fmt.Errorf("%w: cannot move segment %s: claimed by %s until %s", dlqdump.ErrClaimed, name, c.Owner, c.Expires.Format(time.RFC3339Nano))
	}
	err = r.move(name, fromDir, toDir, from, to, reason)
	if from != to && (err == nil || errors.Is(err, dlqdump.ErrNotFound)) {
		if rerr := os.Remove(r.claimPath(name)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			r.logger().Warn("cannot remove the claim file of a moved segment", slog.String("segment", name), slog.Any("error", rerr))
		}
	}
	return err
}

// move renames fromDir/name to toDir/name and updates the reason file.
func (r *Reader) move(name, fromDir, toDir string, from, to dlqdump.Area, reason string) error {
	src, dst := filepath.Join(fromDir, name), filepath.Join(toDir, name)
	ok, err := isSegment(src)
	if err != nil {
		return err
	}
	if !ok {
		return notFound(from, name)
	}
	reasonPath := filepath.Join(toDir, name+reasonSuffix)
	if from == to {
		if to == dlqdump.AreaQuarantine && reason != "" {
			return writeFileAtomic(reasonPath, []byte(reason+"\n"), r.perm())
		}
		return nil
	}
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("dlqdump: fs: move %s from %s to %s: %w", name, from, to, os.ErrExist)
	}
	if err := os.MkdirAll(toDir, 0o750); err != nil {
		return fmt.Errorf("dlqdump: fs: %w", err)
	}
	if to == dlqdump.AreaQuarantine {
		if reason != "" {
			if err := writeFileAtomic(reasonPath, []byte(reason+"\n"), r.perm()); err != nil {
				return fmt.Errorf("dlqdump: fs: write reason for %s: %w", name, err)
			}
		} else if err := removeIfExists(reasonPath); err != nil {
			return err
		}
	}
	if err := renameNoReplace(src, dst); err != nil {
		if to == dlqdump.AreaQuarantine && reason != "" {
			_ = os.Remove(reasonPath)
		}
		if errors.Is(err, os.ErrNotExist) {
			return notFound(from, name)
		}
		return fmt.Errorf("dlqdump: fs: move %s from %s to %s: %w", name, from, to, err)
	}
	if from == dlqdump.AreaQuarantine {
		if err := removeIfExists(filepath.Join(fromDir, name+reasonSuffix)); err != nil {
			return err
		}
	}
	if err := syncDir(toDir); err != nil {
		return err
	}
	return syncDir(fromDir)
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("dlqdump: fs: %w", err)
	}
	return nil
}

// Delete removes a segment, with its reason file or claim file, and syncs
// the directory. A claim on a deleted ready segment is lost: its holder gets
// dlqdump.ErrLeaseLost. A missing segment is an error wrapping
// dlqdump.ErrNotFound.
func (r *Reader) Delete(ctx context.Context, area dlqdump.Area, name string) error {
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
	if area == dlqdump.AreaReady {
		f, err := r.lockClaim(ctx, name, true)
		if err != nil {
			return err
		}
		defer f.Close()
	}
	if err := os.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			err = notFound(area, name)
		}
		return fmt.Errorf("dlqdump: fs: delete: %w", err)
	}
	var extra string
	switch area {
	case dlqdump.AreaReady:
		extra = r.claimPath(name)
	case dlqdump.AreaQuarantine:
		extra = path + reasonSuffix
	}
	if extra != "" {
		if err := removeIfExists(extra); err != nil {
			return err
		}
	}
	return syncDir(dir)
}

// Recover publishes the segments that crashed writers left open, like
// Writer.Recover: in the ready directory (a Queue, or a Restorer writing the
// rest of a segment) and in the quarantine directory (a Restorer writing
// quarantined records), where damaged files stay, with a reason. It also
// removes claim files whose segment is gone. It returns the names of the
// published segments. A missing directory has nothing to recover.
func (r *Reader) Recover(ctx context.Context) ([]string, error) {
	if r.Directory == "" {
		return nil, fmt.Errorf("%w: fs.Reader.Directory: required", dlqdump.ErrConfig)
	}
	var names []string
	var errs []error
	ready, quarantine := r.writer(r.Directory), r.writer(filepath.Join(r.Directory, QuarantineDir))
	quarantine.aside = "." // damaged files are already in quarantine
	for _, w := range []*Writer{ready, quarantine} {
		if _, err := os.Stat(w.Directory); errors.Is(err, os.ErrNotExist) {
			continue
		}
		n, err := w.Recover(ctx)
		names = append(names, n...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.removeStaleClaims(ctx); err != nil {
		errs = append(errs, err)
	}
	return names, errors.Join(errs...)
}

// removeStaleClaims removes the claim files of segments that are not ready,
// left by a crash between removing a segment and its claim. A claim file
// locked at the time is left alone.
func (r *Reader) removeStaleClaims(ctx context.Context) error {
	claims, err := r.claimNames()
	if err != nil {
		return err
	}
	for name := range claims {
		if err := ctx.Err(); err != nil {
			return err
		}
		if ok, err := isSegment(filepath.Join(r.Directory, name)); err != nil || ok {
			continue
		}
		path := r.claimPath(name)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if locked, _ := tryLock(f); locked && sameFile(f, path) {
			if ok, err := isSegment(filepath.Join(r.Directory, name)); err == nil && !ok {
				if os.Remove(path) == nil {
					r.logger().Info("removed the claim file of a segment that is gone", slog.String("segment", name))
				}
			}
		}
		_ = f.Close()
	}
	return nil
}

// claimFile is the content of a claim file, in the JSON format documented in
// the package documentation. It is rewritten in place (pwrite, then truncate)
// under an flock on the file, so a killed process leaves either the old or
// the new claim, possibly followed by the tail of a longer old one, which
// parseClaim ignores. Release keeps the owner and checkpoint, clears the
// token and sets expires to the zero time.
type claimFile struct {
	Owner      string          `json:"owner"`
	Token      string          `json:"token,omitempty"`
	Expires    time.Time       `json:"expires"`
	Checkpoint claimCheckpoint `json:"checkpoint"`
}

type claimCheckpoint struct {
	Offset      int64  `json:"offset"`
	Seq         uint64 `json:"seq"`
	Delivered   uint64 `json:"delivered"`
	Quarantined uint64 `json:"quarantined"`
}

func (c claimCheckpoint) get() dlqdump.Checkpoint {
	var cp dlqdump.Checkpoint
	cp.Position.Offset, cp.Position.Seq = c.Offset, c.Seq
	cp.Delivered, cp.Quarantined = c.Delivered, c.Quarantined
	return cp
}

func toClaimCheckpoint(cp dlqdump.Checkpoint) claimCheckpoint {
	return claimCheckpoint{Offset: cp.Position.Offset, Seq: cp.Position.Seq, Delivered: cp.Delivered, Quarantined: cp.Quarantined}
}

// parseClaim parses the first JSON value in b; ok is false if there is none.
func parseClaim(b []byte) (c claimFile, ok bool) {
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&c); err != nil {
		return claimFile{}, false
	}
	return c, true
}

// readClaim reads the claim in f. ok is false when f holds no valid claim.
func readClaim(f *os.File) (c claimFile, ok bool, err error) {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, maxClaimSize))
	if err != nil {
		return claimFile{}, false, fmt.Errorf("dlqdump: fs: read claim: %w", err)
	}
	c, ok = parseClaim(b)
	return c, ok, nil
}

// writeClaim replaces the claim in f: one write of the whole file, then a
// truncation to its length.
func writeClaim(f *os.File, c *claimFile) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("dlqdump: fs: write claim: %w", err)
	}
	if err := f.Truncate(int64(len(b))); err != nil {
		return fmt.Errorf("dlqdump: fs: write claim: %w", err)
	}
	return nil
}

// lockClaim opens and locks the claim file of a segment; see lockFile.
func (r *Reader) lockClaim(ctx context.Context, name string, create bool) (*os.File, error) {
	if create {
		if err := os.MkdirAll(filepath.Join(r.Directory, ClaimsDir), 0o750); err != nil {
			return nil, fmt.Errorf("dlqdump: fs: %w", err)
		}
	}
	return lockFile(ctx, r.claimPath(name), create, r.perm())
}

// busyIsClaimed turns a claim file that stayed locked into an error wrapping
// dlqdump.ErrClaimed: another restorer is claiming the segment.
func busyIsClaimed(name string, err error) error {
	if errors.Is(err, errLockBusy) {
		return fmt.Errorf("%w: segment %s: %w", dlqdump.ErrClaimed, name, err)
	}
	return err
}

// lockFile opens path (creating it when create is set; a missing file is
// otherwise an error wrapping os.ErrNotExist) and takes its exclusive lock,
// trying every millisecond or two for at most lockWait (errLockBusy) or until
// ctx is done. Closing the file releases the lock. A file removed or replaced
// while waiting is opened again, so the locked file is the one at path.
func lockFile(ctx context.Context, path string, create bool, perm os.FileMode) (*os.File, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	}
	deadline := time.Now().Add(lockWait)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var f *os.File
	for {
		if f == nil {
			var err error
			if f, err = os.OpenFile(path, flag, perm); err != nil {
				return nil, fmt.Errorf("dlqdump: fs: open claim: %w", err)
			}
		}
		ok, err := tryLock(f)
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("dlqdump: fs: lock %s: %w", path, err)
		}
		if ok && sameFile(f, path) {
			return f, nil
		}
		if ok {
			// Removed (or replaced) by the holder we waited for: open
			// the file now at path.
			_ = f.Close()
			f = nil
		}
		if !time.Now().Before(deadline) {
			if f != nil {
				_ = f.Close()
			}
			return nil, fmt.Errorf("%w: %s", errLockBusy, path)
		}
		if f == nil {
			continue
		}
		d := time.Millisecond + mrand.N(time.Millisecond)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		}
	}
}

// Claim takes the lease on a ready segment for owner. Under the lock of the
// segment's claim file it checks that the segment exists (removing a stale
// claim file if not: an error wrapping dlqdump.ErrNotFound) and that no other
// owner's claim is live (dlqdump.ErrClaimed), then writes a new claim that
// keeps the previous checkpoint, expired or released. A live claim of the
// same owner is taken over too: the older Claim value loses its lease. A
// claim file that stays locked for seconds (another restorer claiming it at
// that moment, or hung) is an error wrapping dlqdump.ErrClaimed too; Claim
// never blocks longer, nor after ctx is done.
//
// Methods of the returned Claim lock the claim file and check it still holds
// this claim: they fail with dlqdump.ErrLeaseLost once another claim took the
// segment over (or the file was removed or damaged), and with an error
// wrapping dlqdump.ErrClosed once Release, Complete or Quarantine succeeded.
// Renew writes the file without syncing it: a checkpoint survives the
// process being killed, not necessarily the machine losing power. Complete
// and Quarantine sync the directories they change.
func (r *Reader) Claim(ctx context.Context, name, owner string, lease time.Duration) (dlqdump.Claim, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	dir, err := r.areaDir(dlqdump.AreaReady)
	if err != nil {
		return nil, err
	}
	if lease <= 0 {
		return nil, fmt.Errorf("%w: fs: claim %s: lease %v is not positive", dlqdump.ErrConfig, name, lease)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ok, err := isSegment(filepath.Join(dir, name)); err != nil || !ok {
		// Checked again under the lock; this spares creating a claim
		// file for nothing in the common case.
		if err == nil {
			err = r.dropClaim(ctx, name)
		}
		return nil, err
	}
	f, err := r.lockClaim(ctx, name, true)
	if err != nil {
		return nil, busyIsClaimed(name, err)
	}
	defer f.Close()
	if ok, err := isSegment(filepath.Join(dir, name)); err != nil || !ok {
		if err == nil {
			_ = os.Remove(r.claimPath(name))
			err = notFound(dlqdump.AreaReady, name)
		}
		return nil, err
	}
	old, ok, err := readClaim(f)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if ok && old.Owner != owner && now.Before(old.Expires) {
		return nil, fmt.Errorf("%w: segment %s: claimed by %s until %s", dlqdump.ErrClaimed, name, old.Owner, old.Expires.Format(time.RFC3339Nano))
	}
	c := &claimFile{Owner: owner, Token: rand.Text(), Expires: now.Add(lease).UTC()}
	if ok {
		c.Checkpoint = old.Checkpoint
	}
	if err := writeClaim(f, c); err != nil {
		return nil, err
	}
	return &claim{r: r, name: name, owner: owner, token: c.Token, lease: lease, cp: c.Checkpoint.get()}, nil
}

// dropClaim removes the claim file of a segment found missing and returns
// the ErrNotFound error.
func (r *Reader) dropClaim(ctx context.Context, name string) error {
	if f, err := lockFile(ctx, r.claimPath(name), false, 0); err == nil {
		if ok, err := isSegment(filepath.Join(r.Directory, name)); err == nil && !ok {
			_ = os.Remove(r.claimPath(name))
		}
		_ = f.Close()
	}
	return notFound(dlqdump.AreaReady, name)
}

// claim is a claim taken by Reader.Claim.
type claim struct {
	r                  *Reader
	name, owner, token string
	lease              time.Duration
	cp                 dlqdump.Checkpoint

	mu    sync.Mutex // serialises the methods
	ended bool
}

// Name returns the segment's name.
func (c *claim) Name() string { return c.name }

// Checkpoint returns the checkpoint found when the claim was taken.
func (c *claim) Checkpoint() dlqdump.Checkpoint { return c.cp }

// own locks the claim file and checks that it still holds this claim.
func (c *claim) own(ctx context.Context) (*os.File, *claimFile, error) {
	if c.ended {
		return nil, nil, fmt.Errorf("segment %s: %w", c.name, errClaimEnded)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	f, err := c.r.lockClaim(ctx, c.name, false)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("%w: segment %s: claim file is gone", dlqdump.ErrLeaseLost, c.name)
	}
	if err != nil {
		return nil, nil, err
	}
	cur, ok, err := readClaim(f)
	if err == nil && (!ok || cur.Owner != c.owner || cur.Token != c.token) {
		err = fmt.Errorf("%w: segment %s: taken over by %q", dlqdump.ErrLeaseLost, c.name, cur.Owner)
		if !ok {
			err = fmt.Errorf("%w: segment %s: claim file overwritten", dlqdump.ErrLeaseLost, c.name)
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, &cur, nil
}

// Renew extends the lease to lease from now and records cp.
func (c *claim) Renew(ctx context.Context, cp dlqdump.Checkpoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, cur, err := c.own(ctx)
	if err != nil {
		return err
	}
	defer f.Close()
	cur.Expires = time.Now().Add(c.lease).UTC()
	cur.Checkpoint = toClaimCheckpoint(cp)
	return writeClaim(f, cur)
}

// Release ends the claim, keeping the last checkpoint recorded by Renew; the
// segment may be claimed by anyone at once.
func (c *claim) Release(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, cur, err := c.own(ctx)
	if err != nil {
		return err
	}
	defer f.Close()
	cur.Token, cur.Expires = "", time.Time{}
	if err := writeClaim(f, cur); err != nil {
		return err
	}
	c.ended = true
	return nil
}

// Complete removes the segment, or moves it to the archive directory, then
// removes the claim file, and syncs the directories.
func (c *claim) Complete(ctx context.Context, archive bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, _, err := c.own(ctx)
	if err != nil {
		return err
	}
	defer f.Close()
	dir := c.r.Directory
	src := filepath.Join(dir, c.name)
	if archive {
		adir := filepath.Join(dir, ArchiveDir)
		if err = os.MkdirAll(adir, 0o750); err == nil {
			if err = os.Rename(src, filepath.Join(adir, c.name)); err == nil {
				err = syncDir(adir)
			}
		}
	} else {
		err = os.Remove(src)
	}
	if errors.Is(err, os.ErrNotExist) {
		_ = os.Remove(c.r.claimPath(c.name))
		c.ended = true
		return notFound(dlqdump.AreaReady, c.name)
	}
	if err != nil {
		return fmt.Errorf("dlqdump: fs: complete %s: %w", c.name, err)
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	c.ended = true
	// A claim file left by a crash here is stale and harmless: Claim and
	// Recover remove it.
	return removeIfExists(c.r.claimPath(c.name))
}

// Quarantine moves the segment to the quarantine directory with a .reason
// file, then removes the claim file.
func (c *claim) Quarantine(ctx context.Context, reason string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, _, err := c.own(ctx)
	if err != nil {
		return err
	}
	defer f.Close()
	dir := c.r.Directory
	qdir := filepath.Join(dir, QuarantineDir)
	if reason == "" {
		if err := removeIfExists(filepath.Join(qdir, c.name+reasonSuffix)); err != nil {
			return err
		}
	}
	src := filepath.Join(dir, c.name)
	if err := moveAside(dir, QuarantineDir, src, c.name, reason, c.r.perm()); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if ok, _ := isSegment(src); !ok {
				if reason != "" {
					_ = os.Remove(filepath.Join(qdir, c.name+reasonSuffix))
				}
				_ = os.Remove(c.r.claimPath(c.name))
				c.ended = true
				return notFound(dlqdump.AreaReady, c.name)
			}
		}
		return err
	}
	c.ended = true
	return removeIfExists(c.r.claimPath(c.name))
}
