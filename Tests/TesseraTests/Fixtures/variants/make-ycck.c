#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>
int main(int argc, char **argv) {
    struct jpeg_decompress_struct d; struct jpeg_error_mgr e1, e2;
    FILE *in = fopen(argv[1], "rb"); d.err = jpeg_std_error(&e1); jpeg_create_decompress(&d);
    jpeg_stdio_src(&d, in); jpeg_read_header(&d, TRUE); d.out_color_space = JCS_CMYK; jpeg_start_decompress(&d);
    int w = d.output_width, h = d.output_height; unsigned char *buf = malloc((size_t)w * h * 4);
    while (d.output_scanline < h) { JSAMPROW r = buf + (size_t)d.output_scanline * w * 4; jpeg_read_scanlines(&d, &r, 1); }
    jpeg_finish_decompress(&d);
    struct jpeg_compress_struct c; c.err = jpeg_std_error(&e2); jpeg_create_compress(&c);
    FILE *out = fopen(argv[2], "wb"); jpeg_stdio_dest(&c, out);
    c.image_width = w; c.image_height = h; c.input_components = 4; c.in_color_space = JCS_CMYK;
    jpeg_set_defaults(&c); jpeg_set_colorspace(&c, JCS_YCCK); jpeg_set_quality(&c, 92, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < h) { JSAMPROW r = buf + (size_t)c.next_scanline * w * 4; jpeg_write_scanlines(&c, &r, 1); }
    jpeg_finish_compress(&c); fclose(out); return 0;
}
