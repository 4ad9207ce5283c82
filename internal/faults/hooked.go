package faults

import (
	"context"
	"fmt"

	"github.com/dlqdump/dlqdump/sink"
)

// Hooked is a sink.Reader whose Open, Move, Delete and Discard of a segment
// first call Before (when set) with the operation ("open", "move" with the
// area moved from, "delete"): a test stops a holder there, or lets another
// go on, at the step it names, where an Injector counts calls. Its other
// calls go straight to Reader, Exists and the tables included, so that a
// claim's own looks are not taken for those steps; Discard goes through
// sink.Discard, and so through Reader's own Discard when it has one.
type Hooked struct {
	sink.Reader
	Before func(op string, area sink.Area, name string)
}

func (h *Hooked) hook(op string, area sink.Area, name string) {
	if h.Before != nil {
		h.Before(op, area, name)
	}
}

// Open calls Before("open", area, name), then opens the segment.
func (h *Hooked) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	h.hook("open", area, name)
	return h.Reader.Open(ctx, area, name)
}

// Move calls Before("move", from, name), then moves the segment.
func (h *Hooked) Move(ctx context.Context, name string, from, to sink.Area, reason string) error {
	h.hook("move", from, name)
	return h.Reader.Move(ctx, name, from, to, reason)
}

// Delete calls Before("delete", area, name), then deletes the segment.
func (h *Hooked) Delete(ctx context.Context, area sink.Area, name string) error {
	h.hook("delete", area, name)
	return h.Reader.Delete(ctx, area, name)
}

// Discard calls Before("delete", area, name) for each name, then discards
// them.
func (h *Hooked) Discard(ctx context.Context, area sink.Area, names ...string) error {
	for _, n := range names {
		h.hook("delete", area, n)
	}
	return sink.Discard(ctx, h.Reader, area, names...)
}

// Exists looks through Reader, without calling Before.
func (h *Hooked) Exists(ctx context.Context, area sink.Area, name string) (bool, error) {
	return sink.Exists(ctx, h.Reader, area, name)
}

// Table hands out Reader's tables.
func (h *Hooked) Table(name string) (sink.Records, error) {
	if t, ok := h.Reader.(sink.Tables); ok {
		return t.Table(name)
	}
	return nil, fmt.Errorf("%T keeps no tables", h.Reader)
}
