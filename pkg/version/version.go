package version

// Version is the build's version; "dev" for builds outside the Makefile.
var Version = "dev"
