package cpu

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// A hand-written engine in two parts: in part 0 each thread doubles its
// share of io[0] into io[1], in part 1 it adds 1 to the same share.
const testIR = `
define i64 @kiln_run(i64 %tid, i64 %n, i8* %w, i8* %a, i8** %io, i64* %bar, i64 %part) {
entry:
  %inp = load i8*, i8** %io
  %op = getelementptr i8*, i8** %io, i64 1
  %outp = load i8*, i8** %op
  %in = bitcast i8* %inp to float*
  %out = bitcast i8* %outp to float*
  %lo = mul i64 %tid, 1024
  %lo2 = sdiv i64 %lo, %n
  %t1 = add i64 %tid, 1
  %hi = mul i64 %t1, 1024
  %hi2 = sdiv i64 %hi, %n
  %second = icmp eq i64 %part, 1
  br label %loop
loop:
  %i = phi i64 [ %lo2, %entry ], [ %i1, %body ]
  %c = icmp slt i64 %i, %hi2
  br i1 %c, label %body, label %done
body:
  %po = getelementptr float, float* %out, i64 %i
  %pi = getelementptr float, float* %in, i64 %i
  %x = load float, float* %pi
  %o = load float, float* %po
  %d = fmul float %x, 2.0
  %p1 = fadd float %o, 1.0
  %y = select i1 %second, float %p1, float %d
  store float %y, float* %po
  %i1 = add i64 %i, 1
  br label %loop
done:
  %next = select i1 %second, i64 0, i64 1
  ret i64 %next
}
`

func buildTestSO(t *testing.T, ir string) []byte {
	t.Helper()
	llc, err := exec.LookPath("llc")
	if err != nil {
		if llc, err = exec.LookPath("llc-14"); err != nil { // Debian's llvm-14 package
			t.Skip("llc (LLVM 14) not found: run `make deps`")
		}
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found (needed to link the test engine)")
	}
	dir := t.TempDir()
	ll := filepath.Join(dir, "k.ll")
	os.WriteFile(ll, []byte(ir), 0o644)
	obj := filepath.Join(dir, "k.o")
	if out, err := exec.Command(llc, "-O3", "-filetype=obj", "-relocation-model=pic", "-o", obj, ll).CombinedOutput(); err != nil {
		t.Fatalf("llc: %v\n%s", err, out)
	}
	so := filepath.Join(dir, "k.so")
	if out, err := exec.Command("gcc", "-shared", "-nostdlib", "-o", so, obj).CombinedOutput(); err != nil {
		t.Fatalf("link: %v\n%s", err, out)
	}
	b, err := os.ReadFile(so)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenRun(t *testing.T) {
	lib, err := Open(buildTestSO(t, testIR))
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	in := make([]float32, 1024)
	for i := range in {
		in[i] = float32(i) + 0.5
	}
	for _, n := range []int{1, 2, 3, 4} {
		for rep := 0; rep < 50; rep++ {
			out := make([]float32, 1024)
			lib.Run(n, nil, nil, []unsafe.Pointer{unsafe.Pointer(&in[0]), unsafe.Pointer(&out[0])})
			for i := range out {
				if out[i] != 2*in[i]+1 {
					t.Fatalf("threads=%d: out[%d] = %v, want %v", n, i, out[i], 2*in[i]+1)
				}
			}
		}
	}
}

func TestOpenRejectsGarbage(t *testing.T) {
	if _, err := Open([]byte("not an elf")); err == nil {
		t.Fatal("Open accepted garbage")
	}
	if _, err := Open([]byte("\x7fELF garbage")); err == nil {
		t.Fatal("Open accepted a truncated ELF")
	}
}

func TestAlignedBytes(t *testing.T) {
	for _, n := range []int64{1, 63, 64, 1000} {
		b := AlignedBytes(n)
		if int64(len(b)) != n || uintptr(unsafe.Pointer(&b[0]))%64 != 0 {
			t.Fatalf("AlignedBytes(%d): len %d, addr %p", n, len(b), &b[0])
		}
	}
}

func TestNewBuffer(t *testing.T) {
	for _, n := range []int64{100, 3 << 20} {
		b, err := NewBuffer(n)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b.Bytes)) != n || uintptr(unsafe.Pointer(&b.Bytes[0]))%64 != 0 {
			t.Fatalf("NewBuffer(%d): len %d, addr %p", n, len(b.Bytes), &b.Bytes[0])
		}
		for i := range b.Bytes {
			if b.Bytes[i] != 0 {
				t.Fatalf("NewBuffer(%d): byte %d is %d, want 0", n, i, b.Bytes[i])
			}
			b.Bytes[i] = byte(i)
		}
		b.Free()
		b.Free() // twice is harmless
	}
}

// TestPoolParksAndWakes lets the workers outlast their spin and park
// between runs, then checks that a run wakes them.
func TestPoolParksAndWakes(t *testing.T) {
	lib, err := Open(buildTestSO(t, testIR))
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	in := make([]float32, 1024)
	for i := range in {
		in[i] = float32(i)
	}
	for rep := 0; rep < 5; rep++ {
		out := make([]float32, 1024)
		lib.Run(3, nil, nil, []unsafe.Pointer{unsafe.Pointer(&in[0]), unsafe.Pointer(&out[0])})
		for i := range out {
			if out[i] != 2*in[i]+1 {
				t.Fatalf("rep %d: out[%d] = %v, want %v", rep, i, out[i], 2*in[i]+1)
			}
		}
		time.Sleep(4 * idleSpin)
	}
}

// TestPoolKeepsAPerThread: a run on n threads leaves GOMAXPROCS at n + 1
// or more, so that the threads returning to Go find a P (see grow).
func TestPoolKeepsAPerThread(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	lib, err := Open(buildTestSO(t, testIR))
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	in, out := make([]float32, 1024), make([]float32, 1024)
	lib.Run(3, nil, nil, []unsafe.Pointer{unsafe.Pointer(&in[0]), unsafe.Pointer(&out[0])})
	if got := runtime.GOMAXPROCS(0); got < 4 {
		t.Errorf("GOMAXPROCS %d after a run on 3 threads, want at least 4", got)
	}
}

// TestConcurrentRuns calls one library from several goroutines at once,
// each borrowing its own worker pool.
func TestConcurrentRuns(t *testing.T) {
	lib, err := Open(buildTestSO(t, testIR))
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := make([]float32, 1024)
			for i := range in {
				in[i] = float32(g*1024 + i)
			}
			out := make([]float32, 1024)
			for rep := 0; rep < 200; rep++ {
				lib.Run(2+rep%2, nil, nil, []unsafe.Pointer{unsafe.Pointer(&in[0]), unsafe.Pointer(&out[0])})
				for i := range out {
					if out[i] != 2*in[i]+1 {
						t.Errorf("goroutine %d rep %d: out[%d] = %v, want %v", g, rep, i, out[i], 2*in[i]+1)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}
