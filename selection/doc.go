// Package selection is dlqdump's one language for selecting dead letters:
// the dlqdump command line (cat --select, restore --select, job create
// --select, prune --select), restore jobs (jobs.Spec.Select), the
// Restorer (dlqdump.RunOptions.Select) and the web console's search and
// its "Restore this selection" all parse, explain, match and skip with it.
//
// Like gojq it runs in three steps: Parse reads an expression into a tree,
// reporting the position of what is wrong; the tree is compiled into a
// Selection; a Selection matches records (Match) and, before any record is
// read, decides from what is known of a segment (its area and name, its
// header, its footer's time ranges, its summary) whether the segment, or
// which of its blocks, can hold a selected record (Plan). A summary only
// ever says "may match": a segment without one is read.
//
// The language, documented for users in docs/SELECT.md:
//
//	expr    = or
//	or      = and { "or" and }
//	and     = unary { ["and"] unary }          (juxtaposition is "and")
//	unary   = "not" unary | "(" expr ")" | "has" field | compare
//	compare = field op value | field ["not"] "in" "(" value { "," value } ")"
//	        | field ["not"] "like" value
//	field   = "time" | "id" | "area" | "segment" | "payload"
//	        | "header." key | key | "$" json-path
//	op      = "=" | "!=" | "<" | "<=" | ">" | ">=" | "~" | "!~"
//	value   = word | "double-quoted JSON string"
//
// A key that is not one of the field names is a header key ("reason =
// failed" is "header.reason = failed"); "header." takes any key, quoted if
// need be (header."odd key"). "~" is "contains". Times are RFC 3339
// (2026-03-01T12:00:00Z), 2026-03-01T12:00[:05] or a date (UTC), or
// now-DURATION (now-90m, now-7d): they are resolved once, when parsed, and
// String gives them absolute. Which operators a field takes:
//
//	time     <, <=, >, >=                   when the record entered the dump
//	id       =, !=, in                      its RecordID (dlqdump.RecordID)
//	area     =, !=, in                      ready, quarantine or archive
//	segment  =, !=, in                      its segment's name
//	payload  ~, !~                          its payload contains the bytes
//	header   =, !=, in, ~, !~, like, has    a header's value (like: its error
//	                                        signature, package signature)
//	$path    =, !=, in, ~, !~, has          the value at a JSON path
//
// A record without the header (or without a value at the path) does not
// match "=", "in" nor "~", and matches "!=" and "!~".
package selection
