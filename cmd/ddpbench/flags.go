package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/internal/bytesize"
)

var errUsage = errors.New("usage")

// benchConfig is the parsed command line.
type benchConfig struct {
	collective string
	backend    string
	nproc      int
	dtype      comm.DType
	op         comm.ReduceOp
	min, max   int64
	iters      int
	warmup     int
	format     string
	plot       string
	timeout    time.Duration
	bind       string
	mem        string
	stat       string
}

var collectives = []string{"allreduce", "broadcast", "allgather", "reducescatter"}

func parseArgs(args []string, stderr io.Writer) (benchConfig, error) {
	usage := func() {
		fmt.Fprintf(stderr, "usage: ddpbench %s [flags]\n", strings.Join(collectives, "|"))
	}
	var c benchConfig
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		usage()
		return c, errUsage
	}
	c.collective = args[0]
	known := false
	for _, k := range collectives {
		known = known || k == c.collective
	}
	if !known {
		usage()
		return c, fmt.Errorf("unknown collective %q", c.collective)
	}
	fs := flag.NewFlagSet("ddpbench "+c.collective, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.backend, "backend", "", "comm backend: tcp, shm, auto, nccl or another registered name (default: $GODDP_BACKEND, else auto)")
	fs.IntVar(&c.nproc, "nproc", 2, "ranks to spawn when not started by a launcher")
	dtype := fs.String("dtype", "float32", "element type: float32, float64, int32, int64, float16, bfloat16")
	op := fs.String("op", "sum", "reduction: sum, avg, max, min, product")
	minS := fs.String("min", "4K", "smallest message in bytes (K/M/G suffixes)")
	maxS := fs.String("max", "64M", "largest message in bytes (K/M/G suffixes)")
	fs.IntVar(&c.iters, "iters", 0, "timed iterations per size (0: 256 MiB/size clamped to 5..200)")
	fs.IntVar(&c.warmup, "warmup", 3, "untimed iterations per size")
	fs.StringVar(&c.format, "format", "table", "output format: table or csv")
	fs.StringVar(&c.plot, "plot", "", "write a busbw-vs-size plot to this PNG/SVG/PDF file")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "per-op and rendezvous timeout")
	fs.StringVar(&c.stat, "stat", "mean", "time per call: mean (nccl-tests) or median (robust on a busy host)")
	fs.StringVar(&c.mem, "mem", "host", "buffers in host memory (host; staged by the nccl backend) or GPU memory (device; nccl only, as nccl-tests)")
	fs.StringVar(&c.bind, "bind", "auto", "pin each rank to one CPU by local rank (core) or not (none), as mpirun --bind-to; auto: core for host backends, none for nccl")
	if err := fs.Parse(args[1:]); err != nil {
		return c, errUsage
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if c.dtype, err = parseDType(*dtype); err != nil {
		return c, err
	}
	if c.op, err = parseOp(*op); err != nil {
		return c, err
	}
	if c.min, err = bytesize.Parse(*minS); err != nil {
		return c, err
	}
	if c.max, err = bytesize.Parse(*maxS); err != nil {
		return c, err
	}
	switch {
	case c.min < 1 || c.max < c.min:
		return c, fmt.Errorf("need 1 <= -min <= -max, got %d and %d", c.min, c.max)
	case c.nproc < 1:
		return c, fmt.Errorf("-nproc %d", c.nproc)
	case c.format != "table" && c.format != "csv":
		return c, fmt.Errorf("-format %q: want table or csv", c.format)
	case c.stat != "mean" && c.stat != "median":
		return c, fmt.Errorf("-stat %q: want mean or median", c.stat)
	case c.mem != "host" && c.mem != "device":
		return c, fmt.Errorf("-mem %q: want host or device", c.mem)
	case c.bind != "auto" && c.bind != "core" && c.bind != "none":
		return c, fmt.Errorf("-bind %q: want auto, core or none", c.bind)
	case c.iters < 0 || c.warmup < 0:
		return c, fmt.Errorf("-iters and -warmup must be >= 0")
	}
	return c, nil
}

func parseDType(s string) (comm.DType, error) {
	for _, d := range []comm.DType{comm.Float32, comm.Float64, comm.Int32, comm.Int64, comm.Float16, comm.BFloat16} {
		if d.String() == strings.ToLower(s) {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown -dtype %q", s)
}

func parseOp(s string) (comm.ReduceOp, error) {
	for _, o := range []comm.ReduceOp{comm.Sum, comm.Avg, comm.Max, comm.Min, comm.Product} {
		if o.String() == strings.ToLower(s) || (s == "prod" && o == comm.Product) {
			return o, nil
		}
	}
	return 0, fmt.Errorf("unknown -op %q", s)
}
