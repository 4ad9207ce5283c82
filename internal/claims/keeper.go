package claims

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// Keeper keeps a claim alive while its holder works: it renews the lease every
// third of it, with the latest progress, and tells the holder when the claim
// can no longer be relied on. The Restorer and the dlqdump command share it.
// One goroutine, started by Keep and ended by Stop, does the renewing.
type Keeper struct {
	claim  *Claim
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex // serialises writes; guards progress
	progress json.RawMessage

	expired atomic.Bool // the trusted time is over (set by trust)
	lost    atomic.Bool
	trust   *time.Timer

	requested chan struct{} // closed once a write finds a request (Requested)
	reqOnce   sync.Once

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Keep starts keeping claim. The Keeper's Context is ctx, cancelled as well
// when the claim is lost or the Keeper stopped.
func Keep(ctx context.Context, claim *Claim, log *slog.Logger) *Keeper {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k := &Keeper{claim: claim, log: log, stop: make(chan struct{}), done: make(chan struct{}), requested: make(chan struct{}), progress: claim.Progress()}
	k.ctx, k.cancel = context.WithCancel(ctx)
	k.trust = time.AfterFunc(k.untilDistrust(), func() { k.expired.Store(true) })
	go k.heartbeat()
	return k
}

// Claim returns the kept claim.
func (k *Keeper) Claim() *Claim { return k.claim }

// Context is cancelled when the claim is lost or the Keeper stops.
func (k *Keeper) Context() context.Context { return k.ctx }

// Requested is closed once a write of the claim (a renewal every third of
// the lease, or a save) finds a request written into its record from
// outside (Claim.Control), for a holder at work between the steps where it
// looks at Control. The request may have been withdrawn since: look at
// Control again.
func (k *Keeper) Requested() <-chan struct{} { return k.requested }

func (k *Keeper) heartbeat() {
	defer close(k.done)
	t := time.NewTicker(k.claim.c.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-k.stop:
			return
		}
		if err := k.saveCtx(k.ctx); err != nil && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, sink.ErrClosed) {
			k.log.Warn("renewing a claim failed; retrying", slog.String("segment", k.claim.name), slog.Any("error", err))
		}
		if k.lost.Load() {
			return
		}
	}
}

// Hold returns nil while the claim can be relied on, renewing it first when
// its trusted time ran out; call it before every irrevocable step (such as
// delivering a record). The common case reads one atomic flag.
func (k *Keeper) Hold() error {
	if !k.expired.Load() {
		return nil
	}
	if k.lost.Load() {
		return fmt.Errorf("%w: segment %s", ErrLeaseLost, k.claim.name)
	}
	if k.untilDistrust() > 0 {
		return nil
	}
	if err := k.saveCtx(k.ctx); err != nil {
		return fmt.Errorf("%w: segment %s: renew: %w", ErrLeaseLost, k.claim.name, err)
	}
	return nil
}

// SetProgress records progress to be written with the next renewal.
func (k *Keeper) SetProgress(progress json.RawMessage) {
	k.mu.Lock()
	k.progress = progress
	k.mu.Unlock()
}

// Flush writes the progress recorded by SetProgress, if the last write did
// not have it already.
func (k *Keeper) Flush(ctx context.Context) error {
	k.mu.Lock()
	pending := k.progress != nil && string(k.progress) != string(k.claim.lastProgress())
	k.mu.Unlock()
	if !pending {
		return nil
	}
	return k.saveCtx(ctx)
}

// Save records progress and writes it now.
func (k *Keeper) Save(ctx context.Context, progress json.RawMessage) error {
	k.mu.Lock()
	k.progress = progress
	k.mu.Unlock()
	return k.saveCtx(ctx)
}

func (k *Keeper) saveCtx(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.wroteLocked(k.claim.Save(ctx, k.progress))
}

// SaveFinal records progress after which nothing remains but Finish to to
// and writes it now, fencing the claim as Claim.SaveFinal does.
func (k *Keeper) SaveFinal(ctx context.Context, progress json.RawMessage, to Destination) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.progress = progress
	return k.wroteLocked(k.claim.SaveFinal(ctx, progress, to))
}

// Publish decides to publish p on behalf of the kept claim and moves it into
// place (Claim.Publish), saving the progress recorded so far, or progress
// when not nil, with the decision.
func (k *Keeper) Publish(ctx context.Context, p Publication, progress json.RawMessage) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if progress != nil {
		k.progress = progress
	}
	return k.wroteLocked(k.claim.Publish(ctx, p, k.progress))
}

// wroteLocked updates the trust in the claim after a write of its record
// that returned err.
func (k *Keeper) wroteLocked(err error) error {
	if err == nil {
		k.trust.Stop()
		k.expired.Store(false)
		k.trust.Reset(k.untilDistrust())
		if k.claim.Control() != "" {
			k.reqOnce.Do(func() { close(k.requested) })
		}
		return nil
	}
	if errors.Is(err, ErrLeaseLost) {
		k.lost.Store(true)
		k.expired.Store(true)
		k.cancel()
		k.log.Warn("lost the claim on a segment; stopping work on it", slog.String("segment", k.claim.name), slog.Any("error", err))
	}
	return err
}

// Stop ends the renewing and waits for it; the claim stays as it is (call
// Release or Finish on it). Stop may be called more than once.
func (k *Keeper) Stop() {
	k.once.Do(func() {
		close(k.stop)
		<-k.done
		k.trust.Stop()
		k.cancel()
	})
}

// untilDistrust returns how long the claim can still be relied on.
func (k *Keeper) untilDistrust() time.Duration {
	t := k.claim.TrustedUntil()
	if t.IsZero() {
		return 0
	}
	return t.Sub(k.claim.c.now())
}

// Lost reports whether the claim was lost.
func (k *Keeper) Lost() bool { return k.lost.Load() }
