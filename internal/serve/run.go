package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Listeners are where Run serves; a nil listener is a protocol not served.
type Listeners struct {
	HTTP net.Listener
}

// DrainTimeout bounds how long a shutdown waits for requests in flight.
const DrainTimeout = 60 * time.Second

// Run serves on the listeners until ctx is done (SIGTERM, in infer serve),
// then shuts down gracefully: health/ready turns 503 and new requests are
// refused, the requests in flight finish (for up to DrainTimeout), the
// models' queues drain and their engines are unloaded.
func (s *Server) Run(ctx context.Context, ls Listeners) error {
	errc := make(chan error, 2)
	var hs *http.Server
	if ls.HTTP != nil {
		hs = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- hs.Serve(ls.HTTP) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.log.Printf("shutting down: finishing the requests in flight")
	s.draining.Store(true)
	drain, cancel := context.WithTimeout(context.Background(), DrainTimeout)
	defer cancel()
	if hs != nil {
		if e := hs.Shutdown(drain); e != nil && err == nil {
			err = e
		}
	}
	s.Close()
	s.log.Printf("shut down")
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
