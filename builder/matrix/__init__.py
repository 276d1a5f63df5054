"""The compatibility matrix: matrix.yaml loaded (load), typed (model), expanded into cells
(expand). Pure: reading the file is the only I/O."""
