package dlqdump

// Headers are metadata stored beside an item in the dump, such as why it
// was dead-lettered. Keys and values are strings; keep them short.
type Headers map[string]string

// Well-known header keys. Any other key may be used as well.
const (
	// HeaderReason says why the item was dead-lettered, e.g. "leak",
	// "failed", "deadline".
	HeaderReason = "reason"
	// HeaderSource names the queue the item came from. Config.Source sets it
	// on every record that does not carry it.
	HeaderSource = "source"
	// HeaderAttempts is how many times processing the item was attempted.
	HeaderAttempts = "attempts"
	// HeaderError is the last processing error.
	HeaderError = "error"
	// HeaderReplays counts how many times the item was restored from a dump
	// and dead-lettered again (see Config.MaxReplays).
	HeaderReplays = "replays"
	// HeaderQuarantine says why a record was quarantined by the Restorer.
	HeaderQuarantine = "quarantine"
	// HeaderOrigin names the segment a quarantined record came from.
	HeaderOrigin = "origin"
)

// Envelope carries an item together with headers that Queue.Enqueue stores
// beside it. Queue.Enqueue accepts an Envelope or *Envelope wherever it
// accepts an item, including as the payload of a queue.Job.
type Envelope struct {
	// Item is the dead letter itself, encoded by Config.Encoder.
	Item any
	// Headers are stored beside the encoded item.
	Headers Headers
}

// HeaderCarrier is implemented by items that carry their own dump headers.
// Queue.Enqueue stores DLQHeaders beside the item; a Restorer that restores
// such an item (as decoded by Config.Decoder) calls SetDLQHeaders with the
// headers it was stored with, so replay counts survive a round trip through a
// destination queue whose DLQ is the dump again. Those headers hold the
// record's ID in HeaderRecordID, the same on every delivery of the record:
// a destination may drop what it has seen (see RecordID). A Queue dumping
// the item again drops that header: a new dead letter gets a new ID.
type HeaderCarrier interface {
	DLQHeaders() Headers
	SetDLQHeaders(Headers)
}
