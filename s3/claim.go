package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/segment"
)

// claimDoc is the JSON body of a claim object.
type claimDoc struct {
	V          int           `json:"v"`
	Owner      string        `json:"owner,omitempty"`
	Token      string        `json:"token,omitempty"` // the holder's, random per claim
	Expires    time.Time     `json:"expires,omitzero"`
	Checkpoint checkpointDoc `json:"checkpoint"`
	// State is "finishing" while the holder completes, quarantines or
	// moves the segment.
	State string `json:"state,omitempty"`
}

type checkpointDoc struct {
	Offset      int64  `json:"offset"`
	Seq         uint64 `json:"seq"`
	Delivered   uint64 `json:"delivered"`
	Quarantined uint64 `json:"quarantined"`
}

func toCheckpointDoc(cp dlqdump.Checkpoint) checkpointDoc {
	return checkpointDoc{Offset: cp.Position.Offset, Seq: cp.Position.Seq, Delivered: cp.Delivered, Quarantined: cp.Quarantined}
}

func (c checkpointDoc) checkpoint() dlqdump.Checkpoint {
	return dlqdump.Checkpoint{Position: segment.Position{Offset: c.Offset, Seq: c.Seq}, Delivered: c.Delivered, Quarantined: c.Quarantined}
}

func (d *claimDoc) live(now time.Time) bool { return d.Token != "" && d.Expires.After(now) }

func (d *claimDoc) info() *dlqdump.ClaimInfo {
	return &dlqdump.ClaimInfo{Owner: d.Owner, Expires: d.Expires, Checkpoint: d.Checkpoint.checkpoint()}
}

// putClaim writes the claim object of a segment: with If-Match etag, or
// If-None-Match: * when etag is "". It returns the new ETag and the body.
func (s *store) putClaim(ctx context.Context, name string, doc *claimDoc, etag string) (string, []byte, error) {
	key := s.claimKey(name)
	body, err := json.Marshal(doc)
	if err != nil {
		return "", nil, err
	}
	var newTag string
	err = s.call(ctx, "PutObject", key, 0, true, func(ctx context.Context) error {
		in := &awss3.PutObjectInput{
			Bucket:        &s.bucket,
			Key:           &key,
			Body:          bytes.NewReader(body),
			ContentLength: aws.Int64(int64(len(body))),
			ContentType:   aws.String("application/json"),
		}
		if etag == "" {
			in.IfNoneMatch = aws.String("*")
		} else {
			in.IfMatch = aws.String(etag)
		}
		out, err := s.client.PutObject(ctx, in)
		if err == nil {
			newTag = aws.ToString(out.ETag)
		}
		return err
	})
	return newTag, body, err
}

// Claim takes the lease on a ready segment for owner, for lease. A segment
// without a claim object gets one (If-None-Match: *); an expired or released
// claim, or a live one of the same owner, is taken over (If-Match on its
// ETag), checkpoint included: the earlier claim then fails with
// dlqdump.ErrLeaseLost, as claims are told apart by a random token, not by
// the owner. It fails with an error wrapping dlqdump.ErrClaimed while another
// owner's lease is live or when another restorer wins the race, and wrapping
// dlqdump.ErrNotFound when the segment does not exist.
func (r *Reader) Claim(ctx context.Context, name, owner string, lease time.Duration) (dlqdump.Claim, error) {
	s, err := r.state()
	if err != nil {
		return nil, err
	}
	return r.claim(ctx, s, name, owner, lease)
}

func (r *Reader) claim(ctx context.Context, s *store, name, owner string, lease time.Duration) (*claim, error) {
	if owner == "" {
		return nil, fmt.Errorf("dlqdump: s3: claim segment %s: empty owner", name)
	}
	if lease <= 0 {
		return nil, fmt.Errorf("dlqdump: s3: claim segment %s: lease %s is not positive", name, lease)
	}
	if _, _, err := s.headSegment(ctx, dlqdump.AreaReady, name); err != nil {
		return nil, err
	}
	token := newToken()
	const attempts = 4
	for range attempts {
		doc, etag, _, err := s.getClaim(ctx, name)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		var cp checkpointDoc
		if doc != nil {
			if doc.Token == token {
				// Our put went through though its answer was lost.
				return r.claimed(ctx, s, name, owner, token, lease, etag, doc.Checkpoint)
			}
			if doc.live(now) && doc.Owner != owner {
				return nil, fmt.Errorf("%w: segment %s is claimed by %q until %s", dlqdump.ErrClaimed, name, doc.Owner, doc.Expires.UTC().Format(time.RFC3339Nano))
			}
			cp = doc.Checkpoint
		}
		nd := &claimDoc{V: 1, Owner: owner, Token: token, Expires: now.Add(lease), Checkpoint: cp}
		newTag, _, err := s.putClaim(ctx, name, nd, etag)
		if err == nil {
			return r.claimed(ctx, s, name, owner, token, lease, newTag, cp)
		}
		if !preconditionFailed(err) && !notFound(err) {
			return nil, err
		}
		// Another restorer wrote (or removed) the claim since we read it:
		// read it again.
	}
	return nil, fmt.Errorf("%w: segment %s: the claim changed %d times while taking it", dlqdump.ErrClaimed, name, attempts)
}

// claimed returns the claim just taken, after checking that the segment was
// not completed by the previous holder meanwhile. If that cannot be checked,
// the claim is released again rather than left to block the segment.
func (r *Reader) claimed(ctx context.Context, s *store, name, owner, token string, lease time.Duration, etag string, cp checkpointDoc) (*claim, error) {
	c := &claim{s: s, name: name, owner: owner, token: token, lease: lease, etag: etag, found: cp, last: cp}
	if _, _, err := s.headSegment(ctx, dlqdump.AreaReady, name); err != nil {
		if errors.Is(err, dlqdump.ErrNotFound) {
			_ = s.deleteKey(ctx, s.claimKey(name))
		} else if rerr := c.Release(context.WithoutCancel(ctx)); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, err
	}
	return c, nil
}

// claim is a lease on a ready segment held through its claim object.
type claim struct {
	s     *store
	name  string
	owner string
	token string
	lease time.Duration

	mu    sync.Mutex
	etag  string
	found checkpointDoc // when taken
	last  checkpointDoc // last written
	lost  bool
	ended bool
}

var _ dlqdump.Claim = (*claim)(nil)

// Name returns the segment's name.
func (c *claim) Name() string { return c.name }

// Checkpoint returns the checkpoint found when the claim was taken.
func (c *claim) Checkpoint() dlqdump.Checkpoint { return c.found.checkpoint() }

// Renew extends the lease from now and records cp.
func (c *claim) Renew(ctx context.Context, cp dlqdump.Checkpoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := toCheckpointDoc(cp)
	if err := c.write(ctx, "renew", &claimDoc{V: 1, Owner: c.owner, Token: c.token, Expires: time.Now().Add(c.lease), Checkpoint: d}); err != nil {
		return err
	}
	c.last = d
	return nil
}

// Release ends the claim and keeps the last checkpoint, with no owner and no
// expiry, for the next claim.
func (c *claim) Release(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.write(ctx, "release", &claimDoc{V: 1, Checkpoint: c.last}); err != nil {
		return err
	}
	c.ended = true
	return nil
}

// Complete deletes the segment, or moves it to the archive area, then the
// claim object.
func (c *claim) Complete(ctx context.Context, archive bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	to := areaNone
	if archive {
		to = dlqdump.AreaArchive
	}
	return c.finishLocked(ctx, "complete", to, "")
}

// Quarantine moves the segment to the quarantine area with the reason in its
// metadata, then deletes the claim object.
func (c *claim) Quarantine(ctx context.Context, reason string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finishLocked(ctx, "quarantine", dlqdump.AreaQuarantine, reason)
}

// finish moves the segment for Reader.Move.
func (c *claim) finish(ctx context.Context, to dlqdump.Area, reason string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finishLocked(ctx, "move", to, reason)
}

// areaNone as a destination deletes the segment.
const areaNone dlqdump.Area = 255

// finishLocked fences the claim (If-Match, so a taken-over claim fails with
// ErrLeaseLost before anything changes; the lease is extended and marked
// finishing), moves or deletes the segment and deletes the claim object.
// Each step can be repeated, so a failed call can be retried.
func (c *claim) finishLocked(ctx context.Context, op string, to dlqdump.Area, reason string) error {
	if err := c.write(ctx, op, &claimDoc{V: 1, Owner: c.owner, Token: c.token, Expires: time.Now().Add(c.lease), Checkpoint: c.last, State: "finishing"}); err != nil {
		return err
	}
	s := c.s
	if to == areaNone {
		key, _ := s.key(dlqdump.AreaReady, c.name)
		if err := s.deleteKey(ctx, key); err != nil {
			return err
		}
	} else if err := s.move(ctx, c.name, dlqdump.AreaReady, to, reason); err != nil {
		if !errors.Is(err, dlqdump.ErrNotFound) {
			return err
		}
		// Gone from ready: done if a retried call already moved it.
		if _, _, herr := s.headSegment(ctx, to, c.name); herr != nil {
			return err
		}
	}
	if err := s.deleteKey(ctx, s.claimKey(c.name)); err != nil {
		return err
	}
	c.ended = true
	return nil
}

// write replaces the claim object with doc if it is still ours (If-Match on
// the last ETag). A failed precondition means another restorer took the
// claim over, unless the object holds our token (an earlier write of ours
// went through though its answer was lost): then the write is repeated on the
// new ETag. Once lost, every call fails with ErrLeaseLost.
func (c *claim) write(ctx context.Context, op string, doc *claimDoc) error {
	if c.lost {
		return fmt.Errorf("%w: %s segment %s: the claim was taken over", dlqdump.ErrLeaseLost, op, c.name)
	}
	if c.ended {
		return fmt.Errorf("%w: %s segment %s: the claim was already released, completed or quarantined", dlqdump.ErrClosed, op, c.name)
	}
	for range 3 {
		etag, body, err := c.s.putClaim(ctx, c.name, doc, c.etag)
		if err == nil {
			c.etag = etag
			return nil
		}
		if !preconditionFailed(err) && !notFound(err) {
			return fmt.Errorf("dlqdump: s3: %s claim on segment %s: %w", op, c.name, err)
		}
		cur, curTag, raw, gerr := c.s.getClaim(ctx, c.name)
		if gerr != nil {
			return fmt.Errorf("dlqdump: s3: %s claim on segment %s: %w", op, c.name, errors.Join(err, gerr))
		}
		if cur != nil && bytes.Equal(raw, body) {
			c.etag = curTag // this very write went through already
			return nil
		}
		if cur == nil || cur.Token != c.token {
			c.lost = true
			by := "removed"
			if cur != nil {
				by = fmt.Sprintf("taken over by %q", cur.Owner)
			}
			return fmt.Errorf("%w: %s segment %s: the claim was %s: %w", dlqdump.ErrLeaseLost, op, c.name, by, err)
		}
		c.etag = curTag
	}
	return fmt.Errorf("dlqdump: s3: %s claim on segment %s: the claim object keeps changing", op, c.name)
}
