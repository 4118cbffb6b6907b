// SPDX-License-Identifier: Apache-2.0
// Go fixture for stackprov's gopclntab resolver and Go stack tests: inlined helpers, several goroutines
// blocked in known functions (channel receive, mutex, sleep, a busy loop), its own runtime.Stack dump.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

var sink int

// Small leaf helpers: the compiler inlines them (checked by the test against DWARF inlined_subroutine).
func addSquare(a, b int) int { return a*a + b }

func mixTwice(x int) int { return addSquare(x, 3) ^ addSquare(x+1, 5) }

func outerCompute(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += mixTwice(i)
	}
	return s
}

//go:noinline
func blockOnChannel(c chan int) int { return <-c + 1 }

//go:noinline
func blockOnMutex(m *sync.Mutex) { m.Lock(); sink++; m.Unlock() }

//go:noinline
func sleepForever() { time.Sleep(time.Hour) }

//go:noinline
func spinLoop(stop *int32) int {
	x := 0
	for i := 0; ; i++ {
		x += outerCompute(i & 63)
		if i%100000 == 0 && *(*int32)(stop) != 0 {
			return x
		}
	}
}

//go:noinline
func chanWaiter(c chan int, wg *sync.WaitGroup) { wg.Done(); sink += blockOnChannel(c) }

//go:noinline
func mutexWaiter(m *sync.Mutex, wg *sync.WaitGroup) { wg.Done(); blockOnMutex(m) }

//go:noinline
func sleeper(wg *sync.WaitGroup) { wg.Done(); sleepForever() }

//go:noinline
func spinner(stop *int32, wg *sync.WaitGroup) {
	runtime.LockOSThread()
	wg.Done()
	sink += spinLoop(stop)
}

func main() {
	mode := "run"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	if mode == "compute" {
		n, _ := strconv.Atoi(os.Args[2])
		fmt.Println(outerCompute(n))
		return
	}
	var wg sync.WaitGroup
	var m sync.Mutex
	var stop int32
	c := make(chan int)
	m.Lock()
	wg.Add(4)
	go chanWaiter(c, &wg)
	go mutexWaiter(&m, &wg)
	go sleeper(&wg)
	go spinner(&stop, &wg)
	wg.Wait()
	time.Sleep(200 * time.Millisecond)
	if mode == "crash" {
		var p *int
		*p = 1 // GOTRACEBACK=crash: the runtime prints every goroutine, then aborts with a core
	}
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	os.Stdout.Write(buf[:n])
	fmt.Println("READY")
	os.Stdout.Sync()
	// Parked on a thread of its own (a locked M only runs its goroutine): the thread's stack goes
	// through mcall into main.sleepForever as long as the process lives. Unlocked, the M that parked
	// it may be given other work, and the main goroutine is then on no thread's stack (go_stacks.py
	// failed so beside python_stackprov, every capture).
	runtime.LockOSThread()
	sleepForever()
}
