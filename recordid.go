package dlqdump

import "github.com/dlqdump/dlqdump/segment"

// RecordID identifies a dead letter for good: the same after a crash makes a
// Restorer deliver it again, after dlqdump cp, mv and rewrap, in a
// quarantine side segment and after a release from quarantine. Its String
// form, "<24 hex digits>-<sequence number>", is what dlqdump cat, stat --by
// and the console show and a selection takes ("id = ..."); a destination
// that deduplicates may use it as an idempotency key (an HTTP
// Idempotency-Key, a message ID). It is the origin of the segment the
// record was first dumped into (12 bytes of that segment's header ID) and
// the record's sequence number there; copies that move a record to another
// sequence number carry its ID in the header HeaderRecordID (see
// segment/recordid.go). A record dumped again (dead-lettered anew after a
// replay) is a new record with an ID of its own.
type RecordID = segment.RecordID

// HeaderRecordID is the header holding a record's ID in a segment it was
// copied into at another sequence number (the Restorer's side segments, a
// salvaged copy), and in the headers of every record a Restorer delivers
// (a HeaderCarrier's, an Envelope's with Config.DeliverEnvelope): the
// contract a destination deduplicates by. dlqdump restore --to sends it as
// the Idempotency-Key request header; destination adapters (Watermill,
// NATS, Kafka) use Envelope.Headers[HeaderRecordID] as the message ID.
// The Queue does not store it: Enqueue drops it from the headers it is
// given, since a dead letter dumped again is a new record.
const HeaderRecordID = segment.RecordIDHeader

// ParseRecordID parses the String form of a RecordID; an error names what
// is wrong.
func ParseRecordID(s string) (RecordID, error) { return segment.ParseRecordID(s) }

// RecordIDOf returns the ID of rec, read from the segment whose header is
// h (segment.Reader.Header, or the header a segment.Stream's blocks came
// with).
func RecordIDOf(h *segment.Header, rec *segment.Record) RecordID { return h.RecordID(rec) }
