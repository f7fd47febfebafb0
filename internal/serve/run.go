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

// DefaultTimeout is --timeout's default.
const DefaultTimeout = 30 * time.Second

// connTimeouts bound how long one connection, and the file descriptor it
// holds, can keep the server without progress: without them a few hundred
// slow or idle clients hold every descriptor and no new client connects.
type connTimeouts struct {
	// Read bounds a request's header and body, from its first byte; for
	// gRPC, the connection's handshake.
	Read time.Duration
	// Write bounds the answer, from the end of the request's header: the
	// body read, the wait and run (bounded by Config.Timeout) and the
	// write each get a Timeout (0: no bound).
	Write time.Duration
	// Idle bounds a keep-alive connection between requests (gRPC: a
	// connection with no call).
	Idle time.Duration
	// Age (gRPC only) is when a connection is asked to reconnect
	// (GOAWAY); it is closed Write later. It bounds a call whose message
	// trickles in, which no idle timeout sees (0: no bound).
	Age time.Duration
}

// connTimeoutsFor derives the connection timeouts from --timeout. With
// --timeout 0 a request may run as long as it takes, so nothing bounds
// the answer; reading a request and idling still are bounded, by
// DefaultTimeout.
func connTimeoutsFor(t time.Duration) connTimeouts {
	if t <= 0 {
		return connTimeouts{Read: DefaultTimeout, Idle: DefaultTimeout}
	}
	return connTimeouts{Read: t, Write: 3 * t, Idle: t, Age: 10 * t}
}

func (s *Server) httpServer() *http.Server {
	ct := connTimeoutsFor(s.cfg.Timeout)
	return &http.Server{Handler: s.Handler(), ReadHeaderTimeout: ct.Read, ReadTimeout: ct.Read, WriteTimeout: ct.Write, IdleTimeout: ct.Idle}
}

// Run serves on the listeners until ctx is done (SIGTERM, in infer serve),
// then shuts down gracefully: health/ready turns 503 and new requests are
// refused, the requests in flight finish (for up to DrainTimeout), the
// models' queues drain and their engines are unloaded.
func (s *Server) Run(ctx context.Context, ls Listeners) error {
	errc := make(chan error, 2)
	var hs *http.Server
	if ls.HTTP != nil {
		hs = s.httpServer()
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
