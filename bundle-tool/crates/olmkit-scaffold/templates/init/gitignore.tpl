/target/
/images/
*.pending-snap
*.snap.new
# bundle-tool's crash-safe writes (staging and journal while a command commits)
.bundle-tool-stage-*
.bundle-tool-journal
.bundle-tool-journal.tmp
.oci-layout-*
