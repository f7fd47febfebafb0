package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
)

// Listeners are where Run serves; a nil listener is a protocol not served.
type Listeners struct {
	HTTP, GRPC net.Listener
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
	var gs *grpc.Server
	if ls.GRPC != nil {
		gs = s.GRPCServer()
		go func() { errc <- gs.Serve(ls.GRPC) }()
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
	stopped := make(chan struct{})
	go func() {
		if gs != nil {
			gs.GracefulStop()
		}
		close(stopped)
	}()
	if hs != nil {
		if e := hs.Shutdown(drain); e != nil && err == nil {
			err = e
		}
	}
	select {
	case <-stopped:
	case <-drain.Done():
		gs.Stop()
	}
	s.Close()
	s.log.Printf("shut down")
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
