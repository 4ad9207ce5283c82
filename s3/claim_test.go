package s3_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/segment"
)

// The conditional writes claims rely on, as each server implements them:
// If-None-Match: * and If-Match on PutObject, and If-None-Match: * on
// CompleteMultipartUpload (the Writer's multipart uploads).
func TestServerConditionalWrites(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		key := e.prefix + "cond"
		put := func(body string, mod func(*awss3.PutObjectInput)) (string, error) {
			in := &awss3.PutObjectInput{Bucket: &e.bucket, Key: &key, Body: strings.NewReader(body)}
			if mod != nil {
				mod(in)
			}
			out, err := e.client.PutObject(ctx, in)
			if err != nil {
				return "", err
			}
			return aws.ToString(out.ETag), nil
		}
		ifNone := func(in *awss3.PutObjectInput) { in.IfNoneMatch = aws.String("*") }
		etag, err := put("v1", ifNone)
		if err != nil {
			t.Fatalf("If-None-Match on a new key: %v", err)
		}
		if _, err := put("v2", ifNone); !isPrecondition(err) {
			t.Fatalf("If-None-Match on an existing key = %v, want 412", err)
		}
		if _, err := put("v2", func(in *awss3.PutObjectInput) { in.IfMatch = aws.String(`"0123456789abcdef0123456789abcdef"`) }); !isPrecondition(err) {
			t.Fatalf("If-Match with a wrong ETag = %v, want 412", err)
		}
		etag2, err := put("v2", func(in *awss3.PutObjectInput) { in.IfMatch = &etag })
		if err != nil {
			t.Fatalf("If-Match with the right ETag: %v", err)
		}
		if _, err := put("v3", func(in *awss3.PutObjectInput) { in.IfMatch = &etag }); !isPrecondition(err) {
			t.Fatalf("If-Match with a stale ETag = %v, want 412", err)
		}
		if got, _ := e.get(t, "cond"); string(got) != "v2" {
			t.Fatalf("object = %q, want v2", got)
		}
		_ = etag2

		// Multipart: complete with If-None-Match onto an existing key.
		up, err := e.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &e.bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		part, err := e.client.UploadPart(ctx, &awss3.UploadPartInput{Bucket: &e.bucket, Key: &key, UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("multipart")})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: &e.bucket, Key: &key, UploadId: up.UploadId, IfNoneMatch: aws.String("*"),
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1)}}}})
		got, _ := e.get(t, "cond")
		switch {
		case isPrecondition(err) && string(got) == "v2":
			t.Logf("%s: CompleteMultipartUpload honours If-None-Match", e.srv.Name)
		case err == nil && string(got) == "multipart" && e.srv.Name == "gofakes3":
			t.Logf("%s: CompleteMultipartUpload ignores If-None-Match (a retried multipart upload may overwrite its own object there)", e.srv.Name)
		default:
			t.Fatalf("CompleteMultipartUpload with If-None-Match onto an existing key = %v, object %q", err, got)
		}
	})
}

func isPrecondition(err error) bool {
	var re interface{ HTTPStatusCode() int }
	return errors.As(err, &re) && re.HTTPStatusCode() == 412
}

// writeSegment stores a small ready segment directly and returns its name.
func (e *env) writeSegment(t *testing.T) string {
	t.Helper()
	name, data := buildSegment(t, time.Now(), segment.CodecZstd, []byte("claimed record"))
	e.put(t, name, data)
	return name
}

// A claim is a JSON object at PREFIX.claims/NAME.claim with the owner, the
// expiry and the checkpoint; Release keeps the checkpoint without owner or
// expiry; the claim never shows up as a segment.
func TestClaimObject(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		name := e.writeSegment(t)
		r := &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry}
		c, err := r.Claim(ctx, name, "restorer-1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		cp := dlqdump.Checkpoint{Position: segment.Position{Offset: 4096, Seq: 17}, Delivered: 16, Quarantined: 1}
		if err := c.Renew(ctx, cp); err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Owner      string
			Token      string
			Expires    time.Time
			Checkpoint struct{ Offset, Seq, Delivered, Quarantined int64 }
		}
		body, err := e.get(t, s3.ClaimsPrefix+name+s3.ClaimSuffix)
		if err != nil {
			t.Fatalf("claim object: %v", err)
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("claim object %q: %v", body, err)
		}
		if doc.Owner != "restorer-1" || doc.Token == "" || time.Until(doc.Expires) < 50*time.Second || doc.Checkpoint.Offset != 4096 || doc.Checkpoint.Seq != 17 || doc.Checkpoint.Delivered != 16 || doc.Checkpoint.Quarantined != 1 {
			t.Fatalf("claim object = %s", body)
		}
		if keys := e.keys(t); len(keys) != 2 {
			t.Fatalf("keys = %q, want the segment and its claim", keys)
		}
		var listed []dlqdump.SegmentInfo
		for si, err := range r.List(ctx, dlqdump.AreaReady) {
			if err != nil {
				t.Fatal(err)
			}
			listed = append(listed, si)
		}
		if len(listed) != 1 || listed[0].Name != name || listed[0].Claim == nil || listed[0].Claim.Owner != "restorer-1" || listed[0].Claim.Checkpoint != cp {
			t.Fatalf("List = %+v, want the segment with restorer-1's claim", listed)
		}
		if err := c.Release(ctx); err != nil {
			t.Fatal(err)
		}
		body, _ = e.get(t, s3.ClaimsPrefix+name+s3.ClaimSuffix)
		doc.Owner, doc.Token, doc.Expires = "x", "x", time.Now()
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(body, []byte("owner")) || bytes.Contains(body, []byte("token")) || bytes.Contains(body, []byte("expires")) || doc.Checkpoint.Offset != 4096 {
			t.Fatalf("released claim object = %s, want only the checkpoint", body)
		}
		if err := c.Renew(ctx, cp); !errors.Is(err, dlqdump.ErrClosed) {
			t.Fatalf("Renew after Release = %v, want ErrClosed", err)
		}
	})
}

// The claim protocol holds when requests fail, time out, or take effect
// while the client sees an error: of 16 concurrent claims exactly one wins,
// its renewals never mistake their own earlier write for a takeover, and a
// takeover after expiry makes the old holder's every call fail with
// ErrLeaseLost.
func TestClaimsUnderFaults(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, 3*time.Minute)
		p := newProxy(t, e.srv.Endpoint)
		// The client's own retries are off so that faults reach our code.
		client := e.clientFor(p.URL(), func(o *awss3.Options) { o.RetryMaxAttempts = 1 })
		retry := s3.Retry{MaxAttempts: 30, BaseDelay: 2 * time.Millisecond, MaxDelay: 20 * time.Millisecond, AttemptTimeout: 400 * time.Millisecond}
		r := &s3.Reader{Client: client, Bucket: e.bucket, Prefix: e.prefix, Retry: retry}
		for round := range 3 {
			name := e.writeSegment(t)
			p.setFaults(0.3, 600*time.Millisecond)
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				won    []dlqdump.Claim
				owners []string
				other  []error
				start  = make(chan struct{})
			)
			for i := range 16 {
				owner := fmt.Sprintf("racer-%d", i)
				wg.Go(func() {
					<-start
					c, err := r.Claim(ctx, name, owner, time.Minute)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						won, owners = append(won, c), append(owners, owner)
					case !errors.Is(err, dlqdump.ErrClaimed):
						other = append(other, err)
					}
				})
			}
			close(start)
			wg.Wait()
			if len(other) > 0 {
				t.Fatalf("round %d: claims failed with %v", round, other)
			}
			if len(won) != 1 {
				t.Fatalf("round %d: %d claims won (%q), want exactly 1", round, len(won), owners)
			}
			for i := range 10 {
				if err := won[0].Renew(ctx, dlqdump.Checkpoint{Delivered: uint64(i + 1)}); err != nil {
					t.Fatalf("round %d: renewal %d: %v", round, i, err)
				}
			}
			p.setFaults(0, 0)
			body, _ := e.get(t, s3.ClaimsPrefix+name+s3.ClaimSuffix)
			if !bytes.Contains(body, []byte(`"owner":"`+owners[0]+`"`)) || !bytes.Contains(body, []byte(`"delivered":10`)) {
				t.Fatalf("round %d: claim object %s, want %s's with 10 delivered", round, body, owners[0])
			}
		}
		t.Logf("faults injected: %v", p.injectedCount())

		// Takeover after expiry, under faults.
		name := e.writeSegment(t)
		const lease = time.Second
		old, err := r.Claim(ctx, name, "old", lease)
		if err != nil {
			t.Fatal(err)
		}
		want := dlqdump.Checkpoint{Position: segment.Position{Offset: 64, Seq: 3}, Delivered: 3}
		renewed := time.Now()
		if err := old.Renew(ctx, want); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Claim(ctx, name, "new", time.Minute); !errors.Is(err, dlqdump.ErrClaimed) && time.Since(renewed) < lease {
			t.Fatalf("Claim of a live claim = %v, want ErrClaimed", err)
		}
		p.setFaults(0.3, 600*time.Millisecond)
		time.Sleep(time.Until(renewed.Add(lease + 100*time.Millisecond)))
		var taker dlqdump.Claim
		for taker == nil {
			c, err := r.Claim(ctx, name, "new", time.Minute)
			switch {
			case err == nil:
				taker = c
			case errors.Is(err, dlqdump.ErrClaimed):
				t.Fatalf("Claim after the lease expired: %v", err)
			default:
				t.Fatal(err)
			}
		}
		if taker.Checkpoint().Position != want.Position {
			t.Fatalf("taken over at %+v, want %+v", taker.Checkpoint(), want)
		}
		for i := range 3 {
			if err := old.Renew(ctx, want); !errors.Is(err, dlqdump.ErrLeaseLost) {
				t.Fatalf("old holder's Renew %d after the takeover = %v, want ErrLeaseLost", i, err)
			}
		}
		if err := old.Complete(ctx, false); !errors.Is(err, dlqdump.ErrLeaseLost) {
			t.Fatalf("old holder's Complete = %v, want ErrLeaseLost", err)
		}
		if err := old.Quarantine(ctx, "x"); !errors.Is(err, dlqdump.ErrLeaseLost) {
			t.Fatalf("old holder's Quarantine = %v, want ErrLeaseLost", err)
		}
		if err := taker.Complete(ctx, true); err != nil {
			t.Fatal(err)
		}
		p.setFaults(0, 0)
		if e.exists(t, name) || !e.exists(t, s3.ArchivePrefix+name) || e.exists(t, s3.ClaimsPrefix+name+s3.ClaimSuffix) {
			t.Fatalf("after Complete(archive): keys %q", e.keys(t))
		}
	})
}

// A quarantine reason that is not printable ASCII, or is long, survives the
// trip through object metadata (encoded, and cut at 1 KiB).
func TestQuarantineReasonEncoding(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		r := &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry}
		reasons := map[string]string{}
		for _, reason := range []string{
			"décodage impossible: «bad» JSON\nline 2\ttab",
			"=?not an encoded word",
			strings.Repeat("long reason ", 200),
		} {
			name := e.writeSegment(t)
			c, err := r.Claim(ctx, name, "r", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Quarantine(ctx, reason); err != nil {
				t.Fatal(err)
			}
			reasons[name] = reason
		}
		n := 0
		for si, err := range r.List(ctx, dlqdump.AreaQuarantine) {
			if err != nil {
				t.Fatal(err)
			}
			n++
			want := reasons[si.Name]
			if len(want) > 1024 {
				if len(si.Reason) > 1024+3 || !strings.HasPrefix(want, strings.TrimSuffix(si.Reason, "...")) || len(si.Reason) < 1000 {
					t.Fatalf("long reason came back as %d bytes %.60q", len(si.Reason), si.Reason)
				}
				continue
			}
			if si.Reason != want {
				t.Fatalf("reason %q came back as %q", want, si.Reason)
			}
		}
		if n != 3 {
			t.Fatalf("%d quarantined segments listed, want 3", n)
		}
	})
}
