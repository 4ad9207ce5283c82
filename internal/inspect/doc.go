// Package inspect reads a dump for people: what the dlqdump command line
// (ls, stat, cat, quarantine, verify, cp, mv, restore) and the web console
// (package console) show of it. It summarizes segments from their headers
// and footers, reads their claim records (who holds a segment, how far its
// restore got), walks their records block by block with filters (time
// range, header values, payload text, a JSON path), formats payloads
// (printable text, protobuf as protojson) and releases quarantined
// segments. Everything here reads one block at a time: memory is bounded by
// a block, never by a segment or the store.
package inspect
