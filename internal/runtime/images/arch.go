package images

import "runtime"

func hostArch() string { return runtime.GOARCH }
