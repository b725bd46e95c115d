"""The demo: ``chatkit-trace demo`` (:mod:`.play`), the demo backend
``chatkit-trace demo-backend`` (:mod:`.backend`) and the client that plays its
sessions (:mod:`.client`)."""
