package standin

// What the process observes about the container it runs in, so a test can check that the Pod's
// spec reached it: the /dev/shm size (an emptyDir with medium Memory and a sizeLimit), the GPU
// the device plugin allocated, and the Pod's hostname.

import (
	"os"
	"syscall"
)

// Facts are read once at start; none of them changes while a container runs.
type Facts struct {
	PID                  int
	Hostname             string
	DevShmBytes          *uint64 // nil when /dev/shm is absent
	NvidiaVisibleDevices *string // nil when the variable is unset
}

// Observe reads the facts of this process.
func Observe(getenv func(string) (string, bool)) Facts {
	hostname, _ := os.Hostname() // "" is an honest answer when the kernel will not say
	f := Facts{PID: os.Getpid(), Hostname: hostname, DevShmBytes: filesystemBytes("/dev/shm")}
	if devices, ok := getenv("NVIDIA_VISIBLE_DEVICES"); ok {
		f.NvidiaVisibleDevices = &devices
	}
	return f
}

// filesystemBytes is the size of the file system mounted at path (statfs counts blocks of
// Frsize bytes), or nil when nothing is there.
func filesystemBytes(path string) *uint64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return nil
	}
	size := st.Blocks * uint64(st.Frsize)
	return &size
}
