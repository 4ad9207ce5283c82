package main

import (
	"net/http"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/console"
)

// consoleHandler returns the console (package console) over the demo's
// store, with the current scene's Queue and Restorer, mounted at /console/.
func (a *App) consoleHandler() (http.Handler, error) {
	h, err := console.New(&console.Options{Reader: a.sink.reader, Name: a.sink.desc, Queue: sceneQueue{a}, Restorer: sceneRestorer{a},
		Logger: a.logger})
	if err != nil {
		return nil, err
	}
	return http.StripPrefix("/console", h), nil
}

// sceneQueue and sceneRestorer show the current scene's Queue and Restorer
// (none between scenes).
type (
	sceneQueue    struct{ a *App }
	sceneRestorer struct{ a *App }
)

// Stats returns the current scene's Queue's counters.
func (q sceneQueue) Stats() dlqdump.QueueStats {
	if s := q.a.current(); s != nil {
		return s.dump.Stats()
	}
	return dlqdump.QueueStats{}
}

// Stats returns the current scene's Restorer's counters.
func (r sceneRestorer) Stats() dlqdump.RestorerStats {
	if s := r.a.current(); s != nil {
		return s.rst.Stats()
	}
	return dlqdump.RestorerStats{}
}
