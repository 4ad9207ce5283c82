package fs_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
)

// writeSegment publishes data as a segment named for time t, returning its
// name.
func writeSegment(t *testing.T, dir string, created time.Time, data []byte) string {
	t.Helper()
	name := segment.FileName(created, segment.NewID(created))
	sw, err := (&fs.Writer{Directory: dir}).Create(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := sw.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	return name
}

func claimOf(t *testing.T, rd *fs.Reader, name string) *dlqdump.ClaimInfo {
	t.Helper()
	for si, err := range rd.List(t.Context(), dlqdump.AreaReady) {
		if err != nil {
			t.Fatal(err)
		}
		if si.Name == name {
			return si.Claim
		}
	}
	t.Fatalf("%s is not ready", name)
	return nil
}

// A claim held by another process excludes this one while its holder renews
// it; once the holder is killed and the lease runs out, it is taken over with
// the holder's last checkpoint.
func TestClaimAcrossProcesses(t *testing.T) {
	const lease = 400 * time.Millisecond
	dir := t.TempDir()
	name := writeSegment(t, dir, time.Now(), []byte("a segment claimed by two processes"))

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=claim-holder", "DLQDUMP_FS_DIR="+dir,
		"DLQDUMP_FS_SEGMENT="+name, "DLQDUMP_FS_LEASE="+lease.String())
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	waitFor := func(want string) {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the claim holder exited before saying %q", want)
				}
				if l == want {
					return
				}
			case <-timeout:
				t.Fatalf("the claim holder did not say %q", want)
			}
		}
	}

	rd := &fs.Reader{Directory: dir}
	waitFor("claimed")
	if _, err := rd.Claim(t.Context(), name, "parent", time.Minute); !errors.Is(err, dlqdump.ErrClaimed) {
		t.Fatalf("Claim of a segment another process claimed = %v, want ErrClaimed", err)
	}
	// Renewals keep the claim live past its first lease.
	waitFor("renewed 6")
	if _, err := rd.Claim(t.Context(), name, "parent", time.Minute); !errors.Is(err, dlqdump.ErrClaimed) {
		t.Fatalf("Claim of a renewed claim = %v, want ErrClaimed", err)
	}
	if ci := claimOf(t, rd, name); ci == nil || ci.Owner != "child" || ci.Checkpoint.Delivered < 6 {
		t.Fatalf("List shows claim %+v, want child's with at least 6 delivered", ci)
	}
	if err := rd.Move(t.Context(), name, dlqdump.AreaReady, dlqdump.AreaQuarantine, "x"); !errors.Is(err, dlqdump.ErrClaimed) {
		t.Fatalf("Move of a segment another process claimed = %v, want ErrClaimed", err)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	last := claimOf(t, rd, name)
	if last == nil || last.Owner != "child" || last.Checkpoint.Delivered < 6 {
		t.Fatalf("claim left by the killed holder: %+v", last)
	}
	time.Sleep(time.Until(last.Expires) + lease/2)
	c, err := rd.Claim(t.Context(), name, "parent", time.Minute)
	if err != nil {
		t.Fatalf("Claim after the killed holder's lease expired: %v", err)
	}
	if c.Checkpoint() != last.Checkpoint {
		t.Fatalf("taken-over Checkpoint() = %+v, want the holder's last %+v", c.Checkpoint(), last.Checkpoint)
	}
	if err := c.Complete(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, fs.ArchiveDir, name)); err != nil {
		t.Fatalf("completed segment not archived: %v", err)
	}
}

// fastTempDir returns a new directory on tmpfs (/dev/shm) where there is
// one, else t.TempDir(). Making and removing 100,000 files on a virtual disk
// can take ten times as long as listing them, and it is the listing that is
// tested.
func fastTempDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "dlqdump-fs-test-"); err == nil {
			t.Cleanup(func() {
				if err := os.RemoveAll(dir); err != nil {
					t.Error(err)
				}
			})
			return dir
		}
	}
	return t.TempDir()
}

// Listing 100,000 segments, some claimed, among stray files, returns them
// all in order.
func TestList100k(t *testing.T) {
	const n, claimed = 100_000, 1000
	dir := fastTempDir(t)
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	names := make([]string, n)
	for i := range names {
		created := base.Add(time.Duration(i) * time.Millisecond)
		names[i] = segment.FileName(created, segment.NewID(created))
	}
	start := time.Now()
	claimsDir := filepath.Join(dir, fs.ClaimsDir)
	if err := os.Mkdir(claimsDir, 0o750); err != nil {
		t.Fatal(err)
	}
	// Segments are hard links to a few hidden files of sizes 0 to 3, made
	// in an order unlike the names': links are several times cheaper than
	// inodes on some disks.
	var srcs [4]string
	for size := range srcs {
		srcs[size] = filepath.Join(dir, fmt.Sprintf(".src%d", size))
		if err := os.WriteFile(srcs[size], make([]byte, size), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	for j := range n {
		i := (j * 7919) % n // 7919 is prime, and n's factors are 2 and 5
		if err := os.Link(srcs[i%4], filepath.Join(dir, names[i])); err != nil {
			t.Fatal(err)
		}
		if i%(n/claimed) == 0 {
			claim := fmt.Sprintf(`{"owner":"r%d","expires":"2099-01-01T00:00:00Z","checkpoint":{"offset":64,"seq":%d,"delivered":%d,"quarantined":0}}`+"\n", i, i, i)
			if err := os.WriteFile(filepath.Join(claimsDir, names[i]+".claim"), []byte(claim), 0o640); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Strays that are not segments.
	for _, stray := range []string{"." + names[5] + ".open", ".hidden.dlq", "notes.txt", names[7] + ".reason"} {
		if err := os.WriteFile(filepath.Join(dir, stray), []byte("x"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "dir.dlq"), 0o750); err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d segments in %v", n, time.Since(start))

	rd := &fs.Reader{Directory: dir}
	start = time.Now()
	i, claims := 0, 0
	for si, err := range rd.List(t.Context(), dlqdump.AreaReady) {
		if err != nil {
			t.Fatal(err)
		}
		if i >= n || si.Name != names[i] {
			t.Fatalf("segment %d is %s, want %s", i, si.Name, names[min(i, n-1)])
		}
		if si.Size != int64(i%4) {
			t.Fatalf("%s: size %d, want %d", si.Name, si.Size, i%4)
		}
		if si.Claim != nil {
			claims++
			if si.Claim.Owner != fmt.Sprintf("r%d", i) || si.Claim.Checkpoint.Delivered != uint64(i) {
				t.Fatalf("%s: claim %+v, want r%d's", si.Name, si.Claim, i)
			}
		} else if i%(n/claimed) == 0 {
			t.Fatalf("%s: claim missing", si.Name)
		}
		i++
	}
	took := time.Since(start)
	if i != n || claims != claimed {
		t.Fatalf("listed %d segments with %d claims, want %d with %d", i, claims, n, claimed)
	}
	t.Logf("listed %d segments, %d claimed, in %v", n, claimed, took)
}

// Recover publishes segments left open by crashed writers in the ready and
// quarantine directories; a damaged one in quarantine stays in quarantine.
func TestReaderRecover(t *testing.T) {
	dir := t.TempDir()
	rd := &fs.Reader{Directory: dir}
	ctx := t.Context()
	open := func(area dlqdump.Area, records int) string {
		t.Helper()
		now := time.Now()
		hdr := segment.Header{Codec: segment.CodecZstd, Created: now, ID: segment.NewID(now)}
		name := segment.FileName(now, hdr.ID)
		sw, err := rd.Create(ctx, area, name)
		if err != nil {
			t.Fatal(err)
		}
		w, err := segment.NewWriter(sw, hdr, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range records {
			if err := w.Add(now, nil, fmt.Appendf(nil, "record %d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := sw.Sync(); err != nil {
			t.Fatal(err)
		}
		// The writer dies: its file is closed, never committed.
		if err := sw.(interface{ Close() error }).Close(); err != nil {
			t.Fatal(err)
		}
		return name
	}
	ready, quar := open(dlqdump.AreaReady, 5), open(dlqdump.AreaQuarantine, 7)
	// A temporary file with a damaged header, in quarantine.
	bad := segment.FileName(time.Now(), segment.NewID(time.Now()))
	if err := os.WriteFile(filepath.Join(dir, fs.QuarantineDir, "."+bad+".open"), make([]byte, 100), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, a := range []dlqdump.Area{dlqdump.AreaReady, dlqdump.AreaQuarantine} {
		for range rd.List(ctx, a) {
			t.Fatalf("a segment left open is listed in %s before Recover", a)
		}
	}

	got, err := rd.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{ready, quar}; !slices.Equal(got, want) {
		t.Fatalf("Recover = %q, want %q", got, want)
	}
	count := func(area dlqdump.Area, name string) uint64 {
		t.Helper()
		f, err := rd.Open(ctx, area, name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := segment.NewReader(f, f.Size(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Sealed() {
			t.Fatalf("%s not sealed by Recover", name)
		}
		return r.Footer().Records
	}
	if n := count(dlqdump.AreaReady, ready); n != 5 {
		t.Fatalf("recovered ready segment has %d records, want 5", n)
	}
	if n := count(dlqdump.AreaQuarantine, quar); n != 7 {
		t.Fatalf("recovered quarantined segment has %d records, want 7", n)
	}
	var listed []string
	reasons := map[string]string{}
	for si, err := range rd.List(ctx, dlqdump.AreaQuarantine) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, si.Name)
		reasons[si.Name] = si.Reason
	}
	want := []string{quar, bad}
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("quarantine after Recover = %q, want %q", listed, want)
	}
	if !strings.HasPrefix(reasons[bad], "recover: ") || reasons[quar] != "" {
		t.Fatalf("reasons after Recover = %q", reasons)
	}
	if _, err := os.Stat(filepath.Join(dir, fs.QuarantineDir, fs.QuarantineDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Recover made a quarantine directory inside quarantine: %v", err)
	}
	// Nothing more to do.
	if got, err := rd.Recover(ctx); err != nil || len(got) != 0 {
		t.Fatalf("second Recover = %q, %v", got, err)
	}
}

// A Reader on a directory that does not exist lists nothing, recovers
// nothing and creates nothing.
func TestReaderMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	rd := &fs.Reader{Directory: dir}
	ctx := t.Context()
	for _, a := range []dlqdump.Area{dlqdump.AreaReady, dlqdump.AreaQuarantine, dlqdump.AreaArchive} {
		for _, err := range rd.List(ctx, a) {
			t.Fatalf("List(%s) of a missing directory yielded %v", a, err)
		}
	}
	if got, err := rd.Recover(ctx); err != nil || got != nil {
		t.Fatalf("Recover = %q, %v", got, err)
	}
	name := segment.FileName(time.Now(), segment.NewID(time.Now()))
	if _, err := rd.Claim(ctx, name, "o", time.Minute); !errors.Is(err, dlqdump.ErrNotFound) {
		t.Fatalf("Claim = %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the directory was created: %v", err)
	}
}

// Every method wants a Directory and plain segment names.
func TestReaderRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	empty := &fs.Reader{}
	for _, err := range empty.List(ctx, dlqdump.AreaReady) {
		if !errors.Is(err, dlqdump.ErrConfig) {
			t.Fatalf("List without a Directory = %v, want ErrConfig", err)
		}
	}
	if _, err := empty.Recover(ctx); !errors.Is(err, dlqdump.ErrConfig) {
		t.Fatalf("Recover without a Directory = %v, want ErrConfig", err)
	}
	dir := t.TempDir()
	rd := &fs.Reader{Directory: filepath.Join(dir, "sub")}
	// A segment outside the Reader's directory, reachable with "..".
	outside := writeSegment(t, dir, time.Now(), []byte("outside"))
	good := segment.FileName(time.Now(), segment.NewID(time.Now()))
	for _, name := range []string{"", "../" + outside, "..", "a/" + good, `a\` + good, "." + good, good + ".open", "x.txt"} {
		if _, err := rd.Open(ctx, dlqdump.AreaReady, name); !errors.Is(err, fs.ErrName) {
			t.Errorf("Open(%q) = %v, want ErrName", name, err)
		}
		if _, err := rd.Claim(ctx, name, "o", time.Minute); !errors.Is(err, fs.ErrName) {
			t.Errorf("Claim(%q) = %v, want ErrName", name, err)
		}
		if err := rd.Move(ctx, name, dlqdump.AreaQuarantine, dlqdump.AreaReady, ""); !errors.Is(err, fs.ErrName) {
			t.Errorf("Move(%q) = %v, want ErrName", name, err)
		}
		if err := rd.Delete(ctx, dlqdump.AreaQuarantine, name); !errors.Is(err, fs.ErrName) {
			t.Errorf("Delete(%q) = %v, want ErrName", name, err)
		}
		if _, err := rd.Create(ctx, dlqdump.AreaQuarantine, name); !errors.Is(err, fs.ErrName) {
			t.Errorf("Create(%q) = %v, want ErrName", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, outside)); err != nil {
		t.Fatalf("the segment outside is gone: %v", err)
	}
	if _, err := rd.Open(ctx, dlqdump.Area(9), good); err == nil {
		t.Fatal("Open of an unknown area succeeded")
	}
	if _, err := (&fs.Reader{Directory: dir}).Claim(ctx, outside, "o", 0); !errors.Is(err, dlqdump.ErrConfig) {
		t.Fatalf("Claim with a zero lease = %v, want ErrConfig", err)
	}
}
