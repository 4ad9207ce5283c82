// Package console is a web console for a dump: an http.Handler, its assets
// embedded (it works with no network), over any sink.Reader (a directory,
// an S3 prefix), optionally with a live Queue and Restorer and the store's
// restore jobs. It answers the on-call questions: what failed, why, how
// many, since when, and sends some of it back, slowly, while you watch.
//
// It shows an overview (segments and records by area, bytes, the oldest
// ready record's age, records by reason and by error over time, dump and
// restore rates when live), the segments by area with their state (claimed
// by whom and until when, quarantined with the reason), a record browser
// across segments (time range, header values, payload text, a JSON path;
// payloads pretty-printed, protobuf as protojson given a descriptor set)
// whose pages cost a page, and the restore jobs: start one from the
// current selection at a velocity and a time, watch its progress and ETA on
// its own page, pause, resume or cancel it, and release quarantined
// segments. A record found can be replayed now (a job due now over its ID)
// or discarded (set aside into the quarantine with who and why). Every
// change is written to the store's change log (package changelog), which
// a page lists and verifies. Every page has a URL that reproduces it (the
// search and the open record, a job, the filtered log), and every time is
// UTC, typed or shown.
//
// Pages are sections of web/index.html with a nav button and an entry of
// the pages table in web/app.js (load from the URL's parameters, params for
// the URL); a change is an entry of changeRoutes (console.go), with the
// role it needs.
//
// Mount it under a path with http.StripPrefix:
//
//	h, err := console.New(&console.Options{Reader: &fs.Reader{Directory: dir}})
//	if err != nil { ... }
//	mux.Handle("/dlq/", http.StripPrefix("/dlq", h))
//
// Security: every change is a POST that carries the handler's token in a
// header and passes net/http's cross-origin protection (Origin and
// Sec-Fetch-Site), so another site cannot make a browser change anything;
// ReadOnly refuses every change with 403 and the page shows no control.
// Payloads and headers are shown as text, never as markup, under a strict
// Content-Security-Policy. Records of an encrypted segment show their
// metadata only (block, count, times) unless Keys unwraps its data key. The
// handler does no authentication: put it behind the middleware that
// authenticates your users, as you would River UI or asynqmon, and give it
// Options.Authorize to say who each request is and their Role: a viewer
// looks, an operator replays records, runs jobs and releases named
// segments, an admin also discards records and releases the whole
// quarantine. Every request asks it, every change checks the role, and the
// change log records the principal.
package console
