package hier

import (
	"fmt"
	"os"
	"strings"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/envcfg"
)

// Config is the hier backend's tuning. The zero value means the defaults.
//
//	GODDP_HIER_INTRA          shm  backend within a host
//	GODDP_HIER_INTER          tcp  backend across hosts (and for the flat group)
//	GODDP_HIER_SMALL_BYTES    256K all-reduces up to this size take the latency path
//	GODDP_HIER_SEGMENT_BYTES  16M  pipeline segment of a large all-reduce
type Config struct {
	Intra, Inter string
	// Host names this rank's host; ranks with equal Host form a node. ""
	// means the host name and kernel boot id, as comm's placement does.
	Host         string
	SmallBytes   int
	SegmentBytes int
}

// Defaults. Each segment is one network all-reduce per local rank, whose
// ring synchronises the hosts 2(M-1) times; on the simulated cluster
// (docs/scaleout.md) 4 MiB segments left the links idle a quarter of the
// time at 64 MiB, 16 MiB ones kept them busy.
const (
	DefaultSmallBytes   = 256 << 10
	DefaultSegmentBytes = 16 << 20
)

// ConfigFromEnv reads the GODDP_HIER_* variables; one that does not parse
// is an error wrapping backend.ErrBadArgument that names it.
func ConfigFromEnv() (Config, error) {
	var c Config
	r := envcfg.Reader{Lookup: os.LookupEnv}
	r.String("GODDP_HIER_INTRA", &c.Intra)
	r.String("GODDP_HIER_INTER", &c.Inter)
	r.Bytes("GODDP_HIER_SMALL_BYTES", &c.SmallBytes)
	r.Bytes("GODDP_HIER_SEGMENT_BYTES", &c.SegmentBytes)
	if r.Err != nil {
		return c, fmt.Errorf("hier: %w", r.Err)
	}
	return c, c.Validate()
}

// Validate reports a field out of range, naming it.
func (c Config) Validate() error {
	switch {
	case c.SmallBytes < 0:
		return fmt.Errorf("%w: hier: SmallBytes (GODDP_HIER_SMALL_BYTES) is %d, want >= 0", backend.ErrBadArgument, c.SmallBytes)
	case c.SegmentBytes < 0:
		return fmt.Errorf("%w: hier: SegmentBytes (GODDP_HIER_SEGMENT_BYTES) is %d, want >= 0", backend.ErrBadArgument, c.SegmentBytes)
	case c.Intra == "hier" || c.Inter == "hier":
		return fmt.Errorf("%w: hier: the intra and inter backends cannot be hier itself", backend.ErrBadArgument)
	}
	return nil
}

func (c Config) resolve() Config {
	if c.Intra == "" {
		c.Intra = "shm"
	}
	if c.Inter == "" {
		c.Inter = "tcp"
	}
	if c.SmallBytes == 0 {
		c.SmallBytes = DefaultSmallBytes
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.Host == "" {
		c.Host = HostIdentity()
	}
	return c
}

// HostIdentity is the host name plus the kernel boot id: what comm's
// placement counts ranks per host by, so that hier's nodes are the hosts
// that made "auto" pick it.
func HostIdentity() string {
	h, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return h + "/" + strings.TrimSpace(string(boot))
}
