package fs

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/segment"
)

// newSegment publishes a small segment in dir and returns its name.
func newSegment(t *testing.T, dir string) string {
	t.Helper()
	now := time.Now()
	name := segment.FileName(now, segment.NewID(now))
	sw, err := (&Writer{Directory: dir}).Create(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Write([]byte("segment bytes")); err != nil {
		t.Fatal(err)
	}
	if err := sw.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	return name
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// The claim file holds the documented JSON.
func TestClaimFileFormat(t *testing.T) {
	dir := t.TempDir()
	rd := &Reader{Directory: dir}
	name := newSegment(t, dir)
	c, err := rd.Claim(t.Context(), name, "host-1-abc", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cp := dlqdump.Checkpoint{Position: segment.Position{Offset: 4160, Seq: 77}, Delivered: 70, Quarantined: 7}
	before := time.Now()
	if err := c.Renew(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	read := func() map[string]any {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, ClaimsDir, name+".claim"))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("claim file %q: %v", b, err)
		}
		return m
	}
	m := read()
	if m["owner"] != "host-1-abc" || m["token"] == "" || m["token"] == nil {
		t.Fatalf("claim file %v: want owner host-1-abc and a token", m)
	}
	exp, err := time.Parse(time.RFC3339Nano, m["expires"].(string))
	if err != nil || exp.Before(before.Add(time.Minute)) || exp.After(time.Now().Add(time.Minute)) {
		t.Fatalf("expires %v (%v), want a minute from the Renew", m["expires"], err)
	}
	wantCP := map[string]any{"offset": 4160.0, "seq": 77.0, "delivered": 70.0, "quarantined": 7.0}
	if got, _ := json.Marshal(m["checkpoint"]); string(got) != string(must(json.Marshal(wantCP))) {
		t.Fatalf("checkpoint %s, want %s", got, must(json.Marshal(wantCP)))
	}
	if err := c.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	m = read()
	exp, err = time.Parse(time.RFC3339Nano, m["expires"].(string))
	if err != nil || !exp.IsZero() || m["token"] != nil || m["owner"] != "host-1-abc" {
		t.Fatalf("released claim file %v: want the owner, no token, a zero expiry", m)
	}
	if got, _ := json.Marshal(m["checkpoint"]); string(got) != string(must(json.Marshal(wantCP))) {
		t.Fatalf("released checkpoint %s, want %s", got, must(json.Marshal(wantCP)))
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A claim file that does not parse counts as no claim; one followed by the
// tail of a longer one (a process killed between write and truncate) parses.
func TestClaimFileDamaged(t *testing.T) {
	long := `{"owner":"a-much-longer-owner-name","token":"T1","expires":"2099-01-01T00:00:00Z","checkpoint":{"offset":999999,"seq":99999,"delivered":99999,"quarantined":9}}` + "\n"
	short := `{"owner":"b","token":"T2","expires":"2098-01-01T00:00:00Z","checkpoint":{"offset":64,"seq":1,"delivered":1,"quarantined":0}}` + "\n"
	c, ok := parseClaim([]byte(short + long[len(short):]))
	if !ok || c.Owner != "b" || c.Token != "T2" || c.Checkpoint.Offset != 64 {
		t.Fatalf("parse of a claim with a stale tail = %+v, %v", c, ok)
	}

	dir := t.TempDir()
	rd := &Reader{Directory: dir}
	name := newSegment(t, dir)
	path := filepath.Join(dir, ClaimsDir, name+".claim")
	for _, junk := range []string{"", "{", "\x00\x00\x00\x00", `{"owner":"x","expires":"not a time"}`, `[1,2,3]`} {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(junk), 0o640); err != nil {
			t.Fatal(err)
		}
		for si, err := range rd.List(t.Context(), dlqdump.AreaReady) {
			if err != nil || si.Claim != nil {
				t.Fatalf("List with claim file %q: claim %+v, error %v; want no claim", junk, si.Claim, err)
			}
		}
		cl, err := rd.Claim(t.Context(), name, "owner", time.Minute)
		if err != nil {
			t.Fatalf("Claim over claim file %q: %v", junk, err)
		}
		if cl.Checkpoint() != (dlqdump.Checkpoint{}) {
			t.Fatalf("Claim over claim file %q: checkpoint %+v, want zero", junk, cl.Checkpoint())
		}
		// Damage under a live claim loses it.
		if err := os.WriteFile(path, []byte(junk), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := cl.Renew(t.Context(), dlqdump.Checkpoint{}); !errors.Is(err, dlqdump.ErrLeaseLost) {
			t.Fatalf("Renew over claim file %q = %v, want ErrLeaseLost", junk, err)
		}
	}
}

// Claim files of segments that are gone are removed by Claim and Recover;
// Complete, Quarantine, Move and Delete remove the claim file with the
// segment, and the reason file goes with a segment leaving quarantine.
func TestClaimAndReasonFilesCleanedUp(t *testing.T) {
	dir := t.TempDir()
	rd := &Reader{Directory: dir}
	ctx := t.Context()
	claimFile := func(name string) string { return filepath.Join(dir, ClaimsDir, name+claimSuffix) }
	reasonFile := func(name string) string { return filepath.Join(dir, QuarantineDir, name+reasonSuffix) }
	release := func(name string) {
		t.Helper()
		c, err := rd.Claim(ctx, name, "o", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if !exists(t, claimFile(name)) {
			t.Fatalf("no claim file for %s after Release", name)
		}
	}

	// A stale claim file: Claim says not found and removes it.
	stale := segment.FileName(time.Now(), segment.NewID(time.Now()))
	if err := os.MkdirAll(filepath.Join(dir, ClaimsDir), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(claimFile(stale), []byte(`{"owner":"x"}`), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Claim(ctx, stale, "o", time.Minute); !errors.Is(err, dlqdump.ErrNotFound) {
		t.Fatalf("Claim = %v, want ErrNotFound", err)
	}
	if exists(t, claimFile(stale)) {
		t.Fatal("Claim left a stale claim file")
	}
	// Recover removes stale claim files and keeps live ones.
	live := newSegment(t, dir)
	release(live)
	if err := os.WriteFile(claimFile(stale), []byte(`{"owner":"x"}`), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(t, claimFile(stale)) || !exists(t, claimFile(live)) {
		t.Fatalf("after Recover: stale claim file kept %v, live one kept %v", exists(t, claimFile(stale)), exists(t, claimFile(live)))
	}

	// Move to quarantine drops the claim file and writes the reason.
	if err := rd.Move(ctx, live, dlqdump.AreaReady, dlqdump.AreaQuarantine, "why"); err != nil {
		t.Fatal(err)
	}
	if exists(t, claimFile(live)) || !exists(t, reasonFile(live)) {
		t.Fatal("Move to quarantine: claim file kept or reason file missing")
	}
	if err := rd.Move(ctx, live, dlqdump.AreaQuarantine, dlqdump.AreaReady, ""); err != nil {
		t.Fatal(err)
	}
	if exists(t, reasonFile(live)) {
		t.Fatal("Move out of quarantine kept the reason file")
	}
	// Complete and Quarantine remove the claim file.
	c, err := rd.Claim(ctx, live, "o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Quarantine(ctx, "bad"); err != nil {
		t.Fatal(err)
	}
	if exists(t, claimFile(live)) || readReason(reasonFile(live)) != "bad" {
		t.Fatal("Quarantine: claim file kept or reason file wrong")
	}
	// Delete removes the reason file, and the claim file of a ready one.
	if err := rd.Delete(ctx, dlqdump.AreaQuarantine, live); err != nil {
		t.Fatal(err)
	}
	if exists(t, reasonFile(live)) {
		t.Fatal("Delete kept the reason file")
	}
	done := newSegment(t, dir)
	c, err = rd.Claim(ctx, done, "o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Complete(ctx, false); err != nil {
		t.Fatal(err)
	}
	if exists(t, claimFile(done)) || exists(t, filepath.Join(dir, done)) {
		t.Fatal("Complete kept the claim file or the segment")
	}
	gone := newSegment(t, dir)
	c, err = rd.Claim(ctx, gone, "o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := rd.Delete(ctx, dlqdump.AreaReady, gone); err != nil {
		t.Fatal(err)
	}
	if exists(t, claimFile(gone)) {
		t.Fatal("Delete kept the claim file")
	}
	// The holder of a deleted segment's claim has lost it.
	if err := c.Renew(ctx, dlqdump.Checkpoint{}); !errors.Is(err, dlqdump.ErrLeaseLost) {
		t.Fatalf("Renew of a deleted segment's claim = %v, want ErrLeaseLost", err)
	}
	if err := c.Complete(ctx, false); !errors.Is(err, dlqdump.ErrLeaseLost) {
		t.Fatalf("Complete of a deleted segment's claim = %v, want ErrLeaseLost", err)
	}
	// No temporary files are left behind.
	for _, d := range []string{dir, filepath.Join(dir, ClaimsDir), filepath.Join(dir, QuarantineDir)} {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if n := e.Name(); n != ClaimsDir && (strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".tmp") || strings.HasSuffix(n, openSuffix)) {
				t.Errorf("left in %s: %s", d, n)
			}
		}
	}
}

// A segment gone from under a live claim ends it with ErrNotFound.
func TestCompleteOfVanishedSegment(t *testing.T) {
	dir := t.TempDir()
	rd := &Reader{Directory: dir}
	for _, end := range []func(dlqdump.Claim) error{
		func(c dlqdump.Claim) error { return c.Complete(t.Context(), false) },
		func(c dlqdump.Claim) error { return c.Complete(t.Context(), true) },
		func(c dlqdump.Claim) error { return c.Quarantine(t.Context(), "why") },
	} {
		name := newSegment(t, dir)
		c, err := rd.Claim(t.Context(), name, "o", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		if err := end(c); !errors.Is(err, dlqdump.ErrNotFound) {
			t.Fatalf("ending a claim on a vanished segment = %v, want ErrNotFound", err)
		}
		if exists(t, rd.claimPath(name)) || exists(t, filepath.Join(dir, QuarantineDir, name+reasonSuffix)) {
			t.Fatal("claim or reason file left for a vanished segment")
		}
		if err := c.Release(t.Context()); !errors.Is(err, dlqdump.ErrClosed) {
			t.Fatalf("Release after = %v, want ErrClosed", err)
		}
	}
}
