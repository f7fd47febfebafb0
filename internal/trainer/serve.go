package trainer

import (
	"slices"
	"sync"
	"time"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
)

// Server runs inferences on a goroutine of its own with the parameters a
// training loop publishes: a serving context that learns while it
// serves. Its statistics show that serving never stops for a publish.
type Server struct {
	weights *runtime.WeightSet
	stop    chan struct{}
	wg      sync.WaitGroup

	mu         sync.Mutex // guards the statistics below
	lat        []time.Duration
	errors     int
	publishes  int
	maxPublish time.Duration
}

// ServerStats summarize a server's runs.
type ServerStats struct {
	Runs, Errors int
	P50, P99     time.Duration
	Publishes    int
	MaxPublish   time.Duration // the longest SwapWeights call
}

// NewServer starts serving the inference engine on batches of the
// samples, with params until the first Publish.
func NewServer(eng *runtime.Engine, s *Samples, params map[string]*ir.Tensor, batch int) (*Server, error) {
	first := map[string]*ir.Tensor{}
	for k, v := range params {
		first[k] = v.Clone()
	}
	ws, err := eng.NewWeightSet(first)
	if err != nil {
		return nil, err
	}
	ctx, err := eng.NewContext(runtime.Options{Threads: 1})
	if err != nil {
		return nil, err
	}
	srv := &Server{weights: ws, stop: make(chan struct{})}
	b := s.newBatch(batch)
	order := make([]int, 0, batch)
	for i := 0; i < min(batch, s.N); i++ {
		order = append(order, i)
	}
	s.fill(b, order)
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		for {
			select {
			case <-srv.stop:
				return
			default:
			}
			t0 := time.Now()
			_, err := ctx.RunWith(ws, b.Data)
			d := time.Since(t0)
			srv.mu.Lock()
			srv.lat = append(srv.lat, d)
			if err != nil {
				srv.errors++
			}
			srv.mu.Unlock()
		}
	}()
	return srv, nil
}

// Publish hands the server a new set of parameters (the caller's: it must
// not change them afterwards); a set that does not fit the engine counts
// as an error and leaves the current one.
func (srv *Server) Publish(params map[string]*ir.Tensor) error {
	t0 := time.Now()
	err := srv.weights.SwapWeights(params)
	d := time.Since(t0)
	srv.mu.Lock()
	srv.publishes++
	srv.maxPublish = max(srv.maxPublish, d)
	if err != nil {
		srv.errors++
	}
	srv.mu.Unlock()
	return err
}

// Stop ends serving and returns the statistics.
func (srv *Server) Stop() ServerStats {
	close(srv.stop)
	srv.wg.Wait()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	st := ServerStats{Runs: len(srv.lat), Errors: srv.errors, Publishes: srv.publishes, MaxPublish: srv.maxPublish}
	if len(srv.lat) > 0 {
		l := slices.Clone(srv.lat)
		slices.Sort(l)
		st.P50, st.P99 = l[len(l)/2], l[len(l)*99/100]
	}
	return st
}
