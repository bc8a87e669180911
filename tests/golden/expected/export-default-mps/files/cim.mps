* Source:     Pyomo MPS Writer
* Format:     Free MPS
*
NAME cim_makespan
OBJSENSE
 MIN
ROWS
 N  objective
 L  c_u_makespan_bound(logits_DequantizeLinear)_
 E  c_e_finish_time(b1_add_quant)_
 E  c_e_finish_time(b1_conv1_quant)_
 E  c_e_finish_time(b1_conv2_quant)_
 E  c_e_finish_time(b2_add_quant)_
 E  c_e_finish_time(b2_conv1_quant)_
 E  c_e_finish_time(b2_conv2_quant)_
 E  c_e_finish_time(b2_skip_quant)_
 E  c_e_finish_time(b3_concat_quant)_
 E  c_e_finish_time(b3a_conv_quant)_
 E  c_e_finish_time(b3b_conv_quant)_
 E  c_e_finish_time(b3b_dwconv_quant)_
 E  c_e_finish_time(fc_quant)_
 E  c_e_finish_time(flatten)_
 E  c_e_finish_time(gap_quant)_
 E  c_e_finish_time(input_QuantizeLinear)_
 E  c_e_finish_time(logits_DequantizeLinear)_
 E  c_e_finish_time(stem_conv_quant)_
 L  c_u_precedence(b1_add_quant_b2_conv1_quant)_
 L  c_u_precedence(b1_add_quant_b2_skip_quant)_
 L  c_u_precedence(b1_conv1_quant_b1_conv2_quant)_
 L  c_u_precedence(b1_conv2_quant_b1_add_quant)_
 L  c_u_precedence(b2_add_quant_b3a_conv_quant)_
 L  c_u_precedence(b2_add_quant_b3b_dwconv_quant)_
 L  c_u_precedence(b2_conv1_quant_b2_conv2_quant)_
 L  c_u_precedence(b2_conv2_quant_b2_add_quant)_
 L  c_u_precedence(b2_skip_quant_b2_add_quant)_
 L  c_u_precedence(b3_concat_quant_gap_quant)_
 L  c_u_precedence(b3a_conv_quant_b3_concat_quant)_
 L  c_u_precedence(b3b_conv_quant_b3_concat_quant)_
 L  c_u_precedence(b3b_dwconv_quant_b3b_conv_quant)_
 L  c_u_precedence(fc_quant_logits_DequantizeLinear)_
 L  c_u_precedence(flatten_fc_quant)_
 L  c_u_precedence(gap_quant_flatten)_
 L  c_u_precedence(input_QuantizeLinear_stem_conv_quant)_
 L  c_u_precedence(stem_conv_quant_b1_add_quant)_
 L  c_u_precedence(stem_conv_quant_b1_conv1_quant)_
 L  c_u_transfer_lo(b1_add_quant_b2_conv1_quant)_
 L  c_u_transfer_lo(b1_add_quant_b2_skip_quant)_
 L  c_u_transfer_lo(b1_conv1_quant_b1_conv2_quant)_
 L  c_u_transfer_lo(b1_conv2_quant_b1_add_quant)_
 L  c_u_transfer_lo(b2_add_quant_b3a_conv_quant)_
 L  c_u_transfer_lo(b2_add_quant_b3b_dwconv_quant)_
 L  c_u_transfer_lo(b2_conv1_quant_b2_conv2_quant)_
 L  c_u_transfer_lo(b2_conv2_quant_b2_add_quant)_
 L  c_u_transfer_lo(b2_skip_quant_b2_add_quant)_
 L  c_u_transfer_lo(b3_concat_quant_gap_quant)_
 L  c_u_transfer_lo(b3a_conv_quant_b3_concat_quant)_
 L  c_u_transfer_lo(b3b_conv_quant_b3_concat_quant)_
 L  c_u_transfer_lo(b3b_dwconv_quant_b3b_conv_quant)_
 L  c_u_transfer_lo(fc_quant_logits_DequantizeLinear)_
 L  c_u_transfer_lo(flatten_fc_quant)_
 L  c_u_transfer_lo(gap_quant_flatten)_
 L  c_u_transfer_lo(input_QuantizeLinear_stem_conv_quant)_
 L  c_u_transfer_lo(stem_conv_quant_b1_add_quant)_
 L  c_u_transfer_lo(stem_conv_quant_b1_conv1_quant)_
 L  c_u_transfer_hi(b1_add_quant_b2_conv1_quant)_
 L  c_u_transfer_hi(b1_add_quant_b2_skip_quant)_
 L  c_u_transfer_hi(b1_conv1_quant_b1_conv2_quant)_
 L  c_u_transfer_hi(b1_conv2_quant_b1_add_quant)_
 L  c_u_transfer_hi(b2_add_quant_b3a_conv_quant)_
 L  c_u_transfer_hi(b2_add_quant_b3b_dwconv_quant)_
 L  c_u_transfer_hi(b2_conv1_quant_b2_conv2_quant)_
 L  c_u_transfer_hi(b2_conv2_quant_b2_add_quant)_
 L  c_u_transfer_hi(b2_skip_quant_b2_add_quant)_
 L  c_u_transfer_hi(b3_concat_quant_gap_quant)_
 L  c_u_transfer_hi(b3a_conv_quant_b3_concat_quant)_
 L  c_u_transfer_hi(b3b_conv_quant_b3_concat_quant)_
 L  c_u_transfer_hi(b3b_dwconv_quant_b3b_conv_quant)_
 L  c_u_transfer_hi(fc_quant_logits_DequantizeLinear)_
 L  c_u_transfer_hi(flatten_fc_quant)_
 L  c_u_transfer_hi(gap_quant_flatten)_
 L  c_u_transfer_hi(input_QuantizeLinear_stem_conv_quant)_
 L  c_u_transfer_hi(stem_conv_quant_b1_add_quant)_
 L  c_u_transfer_hi(stem_conv_quant_b1_conv1_quant)_
 L  c_u_order_uv(b2_conv1_quant_b2_skip_quant)_
 L  c_u_order_uv(b2_skip_quant_b2_conv2_quant)_
 L  c_u_order_uv(b3a_conv_quant_b3b_conv_quant)_
 L  c_u_order_uv(b3a_conv_quant_b3b_dwconv_quant)_
 L  c_u_order_vu(b2_conv1_quant_b2_skip_quant)_
 L  c_u_order_vu(b2_skip_quant_b2_conv2_quant)_
 L  c_u_order_vu(b3a_conv_quant_b3b_conv_quant)_
 L  c_u_order_vu(b3a_conv_quant_b3b_dwconv_quant)_
 L  c_u_budget_
 L  c_u_host_serial_
 L  c_u_energetic_head(b2_add_quant)_
 L  c_u_energetic_head(b2_conv2_quant)_
 L  c_u_energetic_head(b3_concat_quant)_
 L  c_u_energetic_head(b3b_conv_quant)_
 L  c_u_energetic_tail(b1_add_quant)_
 L  c_u_energetic_tail(b2_add_quant)_
 L  c_u_energetic_tail(b2_conv1_quant)_
 L  c_u_energetic_tail(b3b_dwconv_quant)_
 L  c_u_bottleneck(b1_add_quant_b2_add_quant)_
 L  c_u_bottleneck(b1_conv1_quant_b1_conv2_quant)_
 L  c_u_bottleneck(b1_conv2_quant_b1_add_quant)_
 L  c_u_bottleneck(b2_add_quant_b3_concat_quant)_
 L  c_u_bottleneck(b3_concat_quant_gap_quant)_
 L  c_u_bottleneck(fc_quant_logits_DequantizeLinear)_
 L  c_u_bottleneck(flatten_fc_quant)_
 L  c_u_bottleneck(gap_quant_flatten)_
 L  c_u_bottleneck(input_QuantizeLinear_stem_conv_quant)_
 L  c_u_bottleneck(stem_conv_quant_b1_conv1_quant)_
COLUMNS
     host(b1_conv1_quant) c_e_finish_time(b1_conv1_quant)_ -6549.9999999999964
     host(b1_conv1_quant) c_u_transfer_lo(b1_conv1_quant_b1_conv2_quant)_ 1
     host(b1_conv1_quant) c_u_transfer_lo(stem_conv_quant_b1_conv1_quant)_ -1
     host(b1_conv1_quant) c_u_transfer_hi(b1_conv1_quant_b1_conv2_quant)_ -1
     host(b1_conv1_quant) c_u_transfer_hi(stem_conv_quant_b1_conv1_quant)_ 1
     host(b1_conv1_quant) c_u_budget_ -2
     host(b1_conv1_quant) c_u_host_serial_ 17749.999999999996
     host(b1_conv2_quant) c_e_finish_time(b1_conv2_quant)_ -6500
     host(b1_conv2_quant) c_u_transfer_lo(b1_conv1_quant_b1_conv2_quant)_ -1
     host(b1_conv2_quant) c_u_transfer_lo(b1_conv2_quant_b1_add_quant)_ 1
     host(b1_conv2_quant) c_u_transfer_hi(b1_conv1_quant_b1_conv2_quant)_ 1
     host(b1_conv2_quant) c_u_transfer_hi(b1_conv2_quant_b1_add_quant)_ -1
     host(b1_conv2_quant) c_u_budget_ -2
     host(b1_conv2_quant) c_u_host_serial_ 17700
     host(b2_conv1_quant) c_e_finish_time(b2_conv1_quant)_ -3050
     host(b2_conv1_quant) c_u_transfer_lo(b1_add_quant_b2_conv1_quant)_ -1
     host(b2_conv1_quant) c_u_transfer_lo(b2_conv1_quant_b2_conv2_quant)_ 1
     host(b2_conv1_quant) c_u_transfer_hi(b1_add_quant_b2_conv1_quant)_ 1
     host(b2_conv1_quant) c_u_transfer_hi(b2_conv1_quant_b2_conv2_quant)_ -1
     host(b2_conv1_quant) c_u_order_uv(b2_conv1_quant_b2_skip_quant)_ 88121.34765625
     host(b2_conv1_quant) c_u_order_vu(b2_conv1_quant_b2_skip_quant)_ 88121.34765625
     host(b2_conv1_quant) c_u_budget_ -2
     host(b2_conv1_quant) c_u_host_serial_ 6250
     host(b2_conv1_quant) c_u_energetic_head(b2_add_quant)_ 6250
     host(b2_conv1_quant) c_u_energetic_head(b2_conv2_quant)_ 6250
     host(b2_conv1_quant) c_u_energetic_tail(b1_add_quant)_ 6250
     host(b2_conv1_quant) c_u_bottleneck(b1_add_quant_b2_add_quant)_ 6250
     host(b2_conv2_quant) c_e_finish_time(b2_conv2_quant)_ -5219.9999999999991
     host(b2_conv2_quant) c_u_transfer_lo(b2_conv1_quant_b2_conv2_quant)_ -1
     host(b2_conv2_quant) c_u_transfer_lo(b2_conv2_quant_b2_add_quant)_ 1
     host(b2_conv2_quant) c_u_transfer_hi(b2_conv1_quant_b2_conv2_quant)_ 1
     host(b2_conv2_quant) c_u_transfer_hi(b2_conv2_quant_b2_add_quant)_ -1
     host(b2_conv2_quant) c_u_order_uv(b2_skip_quant_b2_conv2_quant)_ 88121.34765625
     host(b2_conv2_quant) c_u_order_vu(b2_skip_quant_b2_conv2_quant)_ 88121.34765625
     host(b2_conv2_quant) c_u_budget_ -3
     host(b2_conv2_quant) c_u_host_serial_ 8099.9999999999991
     host(b2_conv2_quant) c_u_energetic_head(b2_add_quant)_ 8099.9999999999991
     host(b2_conv2_quant) c_u_energetic_tail(b1_add_quant)_ 8099.9999999999991
     host(b2_conv2_quant) c_u_energetic_tail(b2_conv1_quant)_ 8099.9999999999991
     host(b2_conv2_quant) c_u_bottleneck(b1_add_quant_b2_add_quant)_ 8099.9999999999991
     host(b2_skip_quant) c_e_finish_time(b2_skip_quant)_ 800
     host(b2_skip_quant) c_u_transfer_lo(b1_add_quant_b2_skip_quant)_ -1
     host(b2_skip_quant) c_u_transfer_lo(b2_skip_quant_b2_add_quant)_ 1
     host(b2_skip_quant) c_u_transfer_hi(b1_add_quant_b2_skip_quant)_ 1
     host(b2_skip_quant) c_u_transfer_hi(b2_skip_quant_b2_add_quant)_ -1
     host(b2_skip_quant) c_u_order_uv(b2_conv1_quant_b2_skip_quant)_ 88121.34765625
     host(b2_skip_quant) c_u_order_uv(b2_skip_quant_b2_conv2_quant)_ 88121.34765625
     host(b2_skip_quant) c_u_order_vu(b2_conv1_quant_b2_skip_quant)_ 88121.34765625
     host(b2_skip_quant) c_u_order_vu(b2_skip_quant_b2_conv2_quant)_ 88121.34765625
     host(b2_skip_quant) c_u_budget_ -1
     host(b2_skip_quant) c_u_host_serial_ 2400
     host(b2_skip_quant) c_u_energetic_head(b2_add_quant)_ 2400
     host(b2_skip_quant) c_u_energetic_tail(b1_add_quant)_ 2400
     host(b2_skip_quant) c_u_bottleneck(b1_add_quant_b2_add_quant)_ 2400
     host(b3a_conv_quant) c_e_finish_time(b3a_conv_quant)_ 1100.0000000000005
     host(b3a_conv_quant) c_u_transfer_lo(b2_add_quant_b3a_conv_quant)_ -1
     host(b3a_conv_quant) c_u_transfer_lo(b3a_conv_quant_b3_concat_quant)_ 1
     host(b3a_conv_quant) c_u_transfer_hi(b2_add_quant_b3a_conv_quant)_ 1
     host(b3a_conv_quant) c_u_transfer_hi(b3a_conv_quant_b3_concat_quant)_ -1
     host(b3a_conv_quant) c_u_order_uv(b3a_conv_quant_b3b_conv_quant)_ 88121.34765625
     host(b3a_conv_quant) c_u_order_uv(b3a_conv_quant_b3b_dwconv_quant)_ 88121.34765625
     host(b3a_conv_quant) c_u_order_vu(b3a_conv_quant_b3b_conv_quant)_ 88121.34765625
     host(b3a_conv_quant) c_u_order_vu(b3a_conv_quant_b3b_dwconv_quant)_ 88121.34765625
     host(b3a_conv_quant) c_u_budget_ -1
     host(b3a_conv_quant) c_u_host_serial_ 1700
     host(b3a_conv_quant) c_u_energetic_head(b3_concat_quant)_ 1700
     host(b3a_conv_quant) c_u_energetic_tail(b2_add_quant)_ 1700
     host(b3a_conv_quant) c_u_bottleneck(b2_add_quant_b3_concat_quant)_ 1700
     host(b3b_conv_quant) c_e_finish_time(b3b_conv_quant)_ 1150.0000000000005
     host(b3b_conv_quant) c_u_transfer_lo(b3b_conv_quant_b3_concat_quant)_ 1
     host(b3b_conv_quant) c_u_transfer_lo(b3b_dwconv_quant_b3b_conv_quant)_ -1
     host(b3b_conv_quant) c_u_transfer_hi(b3b_conv_quant_b3_concat_quant)_ -1
     host(b3b_conv_quant) c_u_transfer_hi(b3b_dwconv_quant_b3b_conv_quant)_ 1
     host(b3b_conv_quant) c_u_order_uv(b3a_conv_quant_b3b_conv_quant)_ 88121.34765625
     host(b3b_conv_quant) c_u_order_vu(b3a_conv_quant_b3b_conv_quant)_ 88121.34765625
     host(b3b_conv_quant) c_u_budget_ -1
     host(b3b_conv_quant) c_u_host_serial_ 1650
     host(b3b_conv_quant) c_u_energetic_head(b3_concat_quant)_ 1650
     host(b3b_conv_quant) c_u_energetic_tail(b2_add_quant)_ 1650
     host(b3b_conv_quant) c_u_energetic_tail(b3b_dwconv_quant)_ 1650
     host(b3b_conv_quant) c_u_bottleneck(b2_add_quant_b3_concat_quant)_ 1650
     host(b3b_dwconv_quant) c_e_finish_time(b3b_dwconv_quant)_ 80
     host(b3b_dwconv_quant) c_u_transfer_lo(b2_add_quant_b3b_dwconv_quant)_ -1
     host(b3b_dwconv_quant) c_u_transfer_lo(b3b_dwconv_quant_b3b_conv_quant)_ 1
     host(b3b_dwconv_quant) c_u_transfer_hi(b2_add_quant_b3b_dwconv_quant)_ 1
     host(b3b_dwconv_quant) c_u_transfer_hi(b3b_dwconv_quant_b3b_conv_quant)_ -1
     host(b3b_dwconv_quant) c_u_order_uv(b3a_conv_quant_b3b_dwconv_quant)_ 88121.34765625
     host(b3b_dwconv_quant) c_u_order_vu(b3a_conv_quant_b3b_dwconv_quant)_ 88121.34765625
     host(b3b_dwconv_quant) c_u_budget_ -3
     host(b3b_dwconv_quant) c_u_host_serial_ 2800
     host(b3b_dwconv_quant) c_u_energetic_head(b3_concat_quant)_ 2800
     host(b3b_dwconv_quant) c_u_energetic_head(b3b_conv_quant)_ 2800
     host(b3b_dwconv_quant) c_u_energetic_tail(b2_add_quant)_ 2800
     host(b3b_dwconv_quant) c_u_bottleneck(b2_add_quant_b3_concat_quant)_ 2800
     host(fc_quant) c_e_finish_time(fc_quant)_ -1289.27734375
     host(fc_quant) c_u_transfer_lo(fc_quant_logits_DequantizeLinear)_ 1
     host(fc_quant) c_u_transfer_lo(flatten_fc_quant)_ -1
     host(fc_quant) c_u_transfer_hi(fc_quant_logits_DequantizeLinear)_ -1
     host(fc_quant) c_u_transfer_hi(flatten_fc_quant)_ 1
     host(fc_quant) c_u_budget_ -1
     host(fc_quant) c_u_host_serial_ 1300
     host(stem_conv_quant) c_e_finish_time(stem_conv_quant)_ -699.99999999999818
     host(stem_conv_quant) c_u_transfer_lo(input_QuantizeLinear_stem_conv_quant)_ -1
     host(stem_conv_quant) c_u_transfer_lo(stem_conv_quant_b1_add_quant)_ 1
     host(stem_conv_quant) c_u_transfer_lo(stem_conv_quant_b1_conv1_quant)_ 1
     host(stem_conv_quant) c_u_transfer_hi(input_QuantizeLinear_stem_conv_quant)_ 1
     host(stem_conv_quant) c_u_transfer_hi(stem_conv_quant_b1_add_quant)_ -1
     host(stem_conv_quant) c_u_transfer_hi(stem_conv_quant_b1_conv1_quant)_ -1
     host(stem_conv_quant) c_u_budget_ -1
     host(stem_conv_quant) c_u_host_serial_ 11449.999999999998
     start(b1_add_quant) c_e_finish_time(b1_add_quant)_ -1
     start(b1_add_quant) c_u_precedence(b1_conv2_quant_b1_add_quant)_ -1
     start(b1_add_quant) c_u_precedence(stem_conv_quant_b1_add_quant)_ -1
     start(b1_add_quant) c_u_bottleneck(b1_conv2_quant_b1_add_quant)_ -1
     start(b1_conv1_quant) c_e_finish_time(b1_conv1_quant)_ -1
     start(b1_conv1_quant) c_u_precedence(stem_conv_quant_b1_conv1_quant)_ -1
     start(b1_conv1_quant) c_u_bottleneck(stem_conv_quant_b1_conv1_quant)_ -1
     start(b1_conv2_quant) c_e_finish_time(b1_conv2_quant)_ -1
     start(b1_conv2_quant) c_u_precedence(b1_conv1_quant_b1_conv2_quant)_ -1
     start(b1_conv2_quant) c_u_bottleneck(b1_conv1_quant_b1_conv2_quant)_ -1
     start(b2_add_quant) c_e_finish_time(b2_add_quant)_ -1
     start(b2_add_quant) c_u_precedence(b2_conv2_quant_b2_add_quant)_ -1
     start(b2_add_quant) c_u_precedence(b2_skip_quant_b2_add_quant)_ -1
     start(b2_add_quant) c_u_energetic_head(b2_add_quant)_ -1
     start(b2_add_quant) c_u_energetic_tail(b1_add_quant)_ -1
     start(b2_add_quant) c_u_energetic_tail(b2_conv1_quant)_ -1
     start(b2_add_quant) c_u_bottleneck(b1_add_quant_b2_add_quant)_ -1
     start(b2_conv1_quant) c_e_finish_time(b2_conv1_quant)_ -1
     start(b2_conv1_quant) c_u_precedence(b1_add_quant_b2_conv1_quant)_ -1
     start(b2_conv1_quant) c_u_order_vu(b2_conv1_quant_b2_skip_quant)_ -1
     start(b2_conv2_quant) c_e_finish_time(b2_conv2_quant)_ -1
     start(b2_conv2_quant) c_u_precedence(b2_conv1_quant_b2_conv2_quant)_ -1
     start(b2_conv2_quant) c_u_order_uv(b2_skip_quant_b2_conv2_quant)_ -1
     start(b2_conv2_quant) c_u_energetic_head(b2_conv2_quant)_ -1
     start(b2_skip_quant) c_e_finish_time(b2_skip_quant)_ -1
     start(b2_skip_quant) c_u_precedence(b1_add_quant_b2_skip_quant)_ -1
     start(b2_skip_quant) c_u_order_uv(b2_conv1_quant_b2_skip_quant)_ -1
     start(b2_skip_quant) c_u_order_vu(b2_skip_quant_b2_conv2_quant)_ -1
     start(b3_concat_quant) c_e_finish_time(b3_concat_quant)_ -1
     start(b3_concat_quant) c_u_precedence(b3a_conv_quant_b3_concat_quant)_ -1
     start(b3_concat_quant) c_u_precedence(b3b_conv_quant_b3_concat_quant)_ -1
     start(b3_concat_quant) c_u_energetic_head(b3_concat_quant)_ -1
     start(b3_concat_quant) c_u_energetic_tail(b2_add_quant)_ -1
     start(b3_concat_quant) c_u_energetic_tail(b3b_dwconv_quant)_ -1
     start(b3_concat_quant) c_u_bottleneck(b2_add_quant_b3_concat_quant)_ -1
     start(b3a_conv_quant) c_e_finish_time(b3a_conv_quant)_ -1
     start(b3a_conv_quant) c_u_precedence(b2_add_quant_b3a_conv_quant)_ -1
     start(b3a_conv_quant) c_u_order_vu(b3a_conv_quant_b3b_conv_quant)_ -1
     start(b3a_conv_quant) c_u_order_vu(b3a_conv_quant_b3b_dwconv_quant)_ -1
     start(b3b_conv_quant) c_e_finish_time(b3b_conv_quant)_ -1
     start(b3b_conv_quant) c_u_precedence(b3b_dwconv_quant_b3b_conv_quant)_ -1
     start(b3b_conv_quant) c_u_order_uv(b3a_conv_quant_b3b_conv_quant)_ -1
     start(b3b_conv_quant) c_u_energetic_head(b3b_conv_quant)_ -1
     start(b3b_dwconv_quant) c_e_finish_time(b3b_dwconv_quant)_ -1
     start(b3b_dwconv_quant) c_u_precedence(b2_add_quant_b3b_dwconv_quant)_ -1
     start(b3b_dwconv_quant) c_u_order_uv(b3a_conv_quant_b3b_dwconv_quant)_ -1
     start(fc_quant) c_e_finish_time(fc_quant)_ -1
     start(fc_quant) c_u_precedence(flatten_fc_quant)_ -1
     start(fc_quant) c_u_bottleneck(flatten_fc_quant)_ -1
     start(flatten) c_e_finish_time(flatten)_ -1
     start(flatten) c_u_precedence(gap_quant_flatten)_ -1
     start(flatten) c_u_bottleneck(gap_quant_flatten)_ -1
     start(gap_quant) c_e_finish_time(gap_quant)_ -1
     start(gap_quant) c_u_precedence(b3_concat_quant_gap_quant)_ -1
     start(gap_quant) c_u_bottleneck(b3_concat_quant_gap_quant)_ -1
     start(input_QuantizeLinear) c_e_finish_time(input_QuantizeLinear)_ -1
     start(logits_DequantizeLinear) c_e_finish_time(logits_DequantizeLinear)_ -1
     start(logits_DequantizeLinear) c_u_precedence(fc_quant_logits_DequantizeLinear)_ -1
     start(logits_DequantizeLinear) c_u_bottleneck(fc_quant_logits_DequantizeLinear)_ -1
     start(stem_conv_quant) c_e_finish_time(stem_conv_quant)_ -1
     start(stem_conv_quant) c_u_precedence(input_QuantizeLinear_stem_conv_quant)_ -1
     start(stem_conv_quant) c_u_bottleneck(input_QuantizeLinear_stem_conv_quant)_ -1
     finish(b1_add_quant) c_e_finish_time(b1_add_quant)_ 1
     finish(b1_add_quant) c_u_precedence(b1_add_quant_b2_conv1_quant)_ 1
     finish(b1_add_quant) c_u_precedence(b1_add_quant_b2_skip_quant)_ 1
     finish(b1_add_quant) c_u_energetic_head(b2_add_quant)_ 1
     finish(b1_add_quant) c_u_energetic_head(b2_conv2_quant)_ 1
     finish(b1_add_quant) c_u_energetic_tail(b1_add_quant)_ 1
     finish(b1_add_quant) c_u_bottleneck(b1_add_quant_b2_add_quant)_ 1
     finish(b1_conv1_quant) c_e_finish_time(b1_conv1_quant)_ 1
     finish(b1_conv1_quant) c_u_precedence(b1_conv1_quant_b1_conv2_quant)_ 1
     finish(b1_conv1_quant) c_u_bottleneck(b1_conv1_quant_b1_conv2_quant)_ 1
     finish(b1_conv2_quant) c_e_finish_time(b1_conv2_quant)_ 1
     finish(b1_conv2_quant) c_u_precedence(b1_conv2_quant_b1_add_quant)_ 1
     finish(b1_conv2_quant) c_u_bottleneck(b1_conv2_quant_b1_add_quant)_ 1
     finish(b2_add_quant) c_e_finish_time(b2_add_quant)_ 1
     finish(b2_add_quant) c_u_precedence(b2_add_quant_b3a_conv_quant)_ 1
     finish(b2_add_quant) c_u_precedence(b2_add_quant_b3b_dwconv_quant)_ 1
     finish(b2_add_quant) c_u_energetic_head(b3_concat_quant)_ 1
     finish(b2_add_quant) c_u_energetic_head(b3b_conv_quant)_ 1
     finish(b2_add_quant) c_u_energetic_tail(b2_add_quant)_ 1
     finish(b2_add_quant) c_u_bottleneck(b2_add_quant_b3_concat_quant)_ 1
     finish(b2_conv1_quant) c_e_finish_time(b2_conv1_quant)_ 1
     finish(b2_conv1_quant) c_u_precedence(b2_conv1_quant_b2_conv2_quant)_ 1
     finish(b2_conv1_quant) c_u_order_uv(b2_conv1_quant_b2_skip_quant)_ 1
     finish(b2_conv1_quant) c_u_energetic_tail(b2_conv1_quant)_ 1
     finish(b2_conv2_quant) c_e_finish_time(b2_conv2_quant)_ 1
     finish(b2_conv2_quant) c_u_precedence(b2_conv2_quant_b2_add_quant)_ 1
     finish(b2_conv2_quant) c_u_order_vu(b2_skip_quant_b2_conv2_quant)_ 1
     finish(b2_skip_quant) c_e_finish_time(b2_skip_quant)_ 1
     finish(b2_skip_quant) c_u_precedence(b2_skip_quant_b2_add_quant)_ 1
     finish(b2_skip_quant) c_u_order_uv(b2_skip_quant_b2_conv2_quant)_ 1
     finish(b2_skip_quant) c_u_order_vu(b2_conv1_quant_b2_skip_quant)_ 1
     finish(b3_concat_quant) c_e_finish_time(b3_concat_quant)_ 1
     finish(b3_concat_quant) c_u_precedence(b3_concat_quant_gap_quant)_ 1
     finish(b3_concat_quant) c_u_bottleneck(b3_concat_quant_gap_quant)_ 1
     finish(b3a_conv_quant) c_e_finish_time(b3a_conv_quant)_ 1
     finish(b3a_conv_quant) c_u_precedence(b3a_conv_quant_b3_concat_quant)_ 1
     finish(b3a_conv_quant) c_u_order_uv(b3a_conv_quant_b3b_conv_quant)_ 1
     finish(b3a_conv_quant) c_u_order_uv(b3a_conv_quant_b3b_dwconv_quant)_ 1
     finish(b3b_conv_quant) c_e_finish_time(b3b_conv_quant)_ 1
     finish(b3b_conv_quant) c_u_precedence(b3b_conv_quant_b3_concat_quant)_ 1
     finish(b3b_conv_quant) c_u_order_vu(b3a_conv_quant_b3b_conv_quant)_ 1
     finish(b3b_dwconv_quant) c_e_finish_time(b3b_dwconv_quant)_ 1
     finish(b3b_dwconv_quant) c_u_precedence(b3b_dwconv_quant_b3b_conv_quant)_ 1
     finish(b3b_dwconv_quant) c_u_order_vu(b3a_conv_quant_b3b_dwconv_quant)_ 1
     finish(b3b_dwconv_quant) c_u_energetic_tail(b3b_dwconv_quant)_ 1
     finish(fc_quant) c_e_finish_time(fc_quant)_ 1
     finish(fc_quant) c_u_precedence(fc_quant_logits_DequantizeLinear)_ 1
     finish(fc_quant) c_u_bottleneck(fc_quant_logits_DequantizeLinear)_ 1
     finish(flatten) c_e_finish_time(flatten)_ 1
     finish(flatten) c_u_precedence(flatten_fc_quant)_ 1
     finish(flatten) c_u_bottleneck(flatten_fc_quant)_ 1
     finish(gap_quant) c_e_finish_time(gap_quant)_ 1
     finish(gap_quant) c_u_precedence(gap_quant_flatten)_ 1
     finish(gap_quant) c_u_bottleneck(gap_quant_flatten)_ 1
     finish(input_QuantizeLinear) c_e_finish_time(input_QuantizeLinear)_ 1
     finish(input_QuantizeLinear) c_u_precedence(input_QuantizeLinear_stem_conv_quant)_ 1
     finish(input_QuantizeLinear) c_u_bottleneck(input_QuantizeLinear_stem_conv_quant)_ 1
     finish(logits_DequantizeLinear) c_u_makespan_bound(logits_DequantizeLinear)_ 1
     finish(logits_DequantizeLinear) c_e_finish_time(logits_DequantizeLinear)_ 1
     finish(stem_conv_quant) c_e_finish_time(stem_conv_quant)_ 1
     finish(stem_conv_quant) c_u_precedence(stem_conv_quant_b1_add_quant)_ 1
     finish(stem_conv_quant) c_u_precedence(stem_conv_quant_b1_conv1_quant)_ 1
     finish(stem_conv_quant) c_u_bottleneck(stem_conv_quant_b1_conv1_quant)_ 1
     transfer(b1_add_quant_b2_conv1_quant) c_u_precedence(b1_add_quant_b2_conv1_quant)_ 479.99999999999994
     transfer(b1_add_quant_b2_conv1_quant) c_u_transfer_lo(b1_add_quant_b2_conv1_quant)_ -1
     transfer(b1_add_quant_b2_conv1_quant) c_u_transfer_hi(b1_add_quant_b2_conv1_quant)_ -1
     transfer(b1_add_quant_b2_skip_quant) c_u_precedence(b1_add_quant_b2_skip_quant)_ 479.99999999999994
     transfer(b1_add_quant_b2_skip_quant) c_u_transfer_lo(b1_add_quant_b2_skip_quant)_ -1
     transfer(b1_add_quant_b2_skip_quant) c_u_transfer_hi(b1_add_quant_b2_skip_quant)_ -1
     transfer(b1_conv1_quant_b1_conv2_quant) c_u_precedence(b1_conv1_quant_b1_conv2_quant)_ 479.99999999999994
     transfer(b1_conv1_quant_b1_conv2_quant) c_u_transfer_lo(b1_conv1_quant_b1_conv2_quant)_ -1
     transfer(b1_conv1_quant_b1_conv2_quant) c_u_transfer_hi(b1_conv1_quant_b1_conv2_quant)_ -1
     transfer(b1_conv2_quant_b1_add_quant) c_u_precedence(b1_conv2_quant_b1_add_quant)_ 479.99999999999994
     transfer(b1_conv2_quant_b1_add_quant) c_u_transfer_lo(b1_conv2_quant_b1_add_quant)_ -1
     transfer(b1_conv2_quant_b1_add_quant) c_u_transfer_hi(b1_conv2_quant_b1_add_quant)_ -1
     transfer(b2_add_quant_b3a_conv_quant) c_u_precedence(b2_add_quant_b3a_conv_quant)_ 160
     transfer(b2_add_quant_b3a_conv_quant) c_u_transfer_lo(b2_add_quant_b3a_conv_quant)_ -1
     transfer(b2_add_quant_b3a_conv_quant) c_u_transfer_hi(b2_add_quant_b3a_conv_quant)_ -1
     transfer(b2_add_quant_b3b_dwconv_quant) c_u_precedence(b2_add_quant_b3b_dwconv_quant)_ 160
     transfer(b2_add_quant_b3b_dwconv_quant) c_u_transfer_lo(b2_add_quant_b3b_dwconv_quant)_ -1
     transfer(b2_add_quant_b3b_dwconv_quant) c_u_transfer_hi(b2_add_quant_b3b_dwconv_quant)_ -1
     transfer(b2_conv1_quant_b2_conv2_quant) c_u_precedence(b2_conv1_quant_b2_conv2_quant)_ 160
     transfer(b2_conv1_quant_b2_conv2_quant) c_u_transfer_lo(b2_conv1_quant_b2_conv2_quant)_ -1
     transfer(b2_conv1_quant_b2_conv2_quant) c_u_transfer_hi(b2_conv1_quant_b2_conv2_quant)_ -1
     transfer(b2_conv2_quant_b2_add_quant) c_u_precedence(b2_conv2_quant_b2_add_quant)_ 160
     transfer(b2_conv2_quant_b2_add_quant) c_u_transfer_lo(b2_conv2_quant_b2_add_quant)_ -1
     transfer(b2_conv2_quant_b2_add_quant) c_u_transfer_hi(b2_conv2_quant_b2_add_quant)_ -1
     transfer(b2_skip_quant_b2_add_quant) c_u_precedence(b2_skip_quant_b2_add_quant)_ 160
     transfer(b2_skip_quant_b2_add_quant) c_u_transfer_lo(b2_skip_quant_b2_add_quant)_ -1
     transfer(b2_skip_quant_b2_add_quant) c_u_transfer_hi(b2_skip_quant_b2_add_quant)_ -1
     transfer(b3_concat_quant_gap_quant) c_u_precedence(b3_concat_quant_gap_quant)_ 160
     transfer(b3_concat_quant_gap_quant) c_u_transfer_lo(b3_concat_quant_gap_quant)_ -1
     transfer(b3_concat_quant_gap_quant) c_u_transfer_hi(b3_concat_quant_gap_quant)_ -1
     transfer(b3a_conv_quant_b3_concat_quant) c_u_precedence(b3a_conv_quant_b3_concat_quant)_ 80
     transfer(b3a_conv_quant_b3_concat_quant) c_u_transfer_lo(b3a_conv_quant_b3_concat_quant)_ -1
     transfer(b3a_conv_quant_b3_concat_quant) c_u_transfer_hi(b3a_conv_quant_b3_concat_quant)_ -1
     transfer(b3b_conv_quant_b3_concat_quant) c_u_precedence(b3b_conv_quant_b3_concat_quant)_ 80
     transfer(b3b_conv_quant_b3_concat_quant) c_u_transfer_lo(b3b_conv_quant_b3_concat_quant)_ -1
     transfer(b3b_conv_quant_b3_concat_quant) c_u_transfer_hi(b3b_conv_quant_b3_concat_quant)_ -1
     transfer(b3b_dwconv_quant_b3b_conv_quant) c_u_precedence(b3b_dwconv_quant_b3b_conv_quant)_ 160
     transfer(b3b_dwconv_quant_b3b_conv_quant) c_u_transfer_lo(b3b_dwconv_quant_b3b_conv_quant)_ -1
     transfer(b3b_dwconv_quant_b3b_conv_quant) c_u_transfer_hi(b3b_dwconv_quant_b3b_conv_quant)_ -1
     transfer(fc_quant_logits_DequantizeLinear) c_u_precedence(fc_quant_logits_DequantizeLinear)_ 0.09765625
     transfer(fc_quant_logits_DequantizeLinear) c_u_transfer_lo(fc_quant_logits_DequantizeLinear)_ -1
     transfer(fc_quant_logits_DequantizeLinear) c_u_transfer_hi(fc_quant_logits_DequantizeLinear)_ -1
     transfer(flatten_fc_quant) c_u_precedence(flatten_fc_quant)_ 0.625
     transfer(flatten_fc_quant) c_u_transfer_lo(flatten_fc_quant)_ -1
     transfer(flatten_fc_quant) c_u_transfer_hi(flatten_fc_quant)_ -1
     transfer(gap_quant_flatten) c_u_precedence(gap_quant_flatten)_ 0.625
     transfer(gap_quant_flatten) c_u_transfer_lo(gap_quant_flatten)_ -1
     transfer(gap_quant_flatten) c_u_transfer_hi(gap_quant_flatten)_ -1
     transfer(input_QuantizeLinear_stem_conv_quant) c_u_precedence(input_QuantizeLinear_stem_conv_quant)_ 29.999999999999996
     transfer(input_QuantizeLinear_stem_conv_quant) c_u_transfer_lo(input_QuantizeLinear_stem_conv_quant)_ -1
     transfer(input_QuantizeLinear_stem_conv_quant) c_u_transfer_hi(input_QuantizeLinear_stem_conv_quant)_ -1
     transfer(stem_conv_quant_b1_add_quant) c_u_precedence(stem_conv_quant_b1_add_quant)_ 479.99999999999994
     transfer(stem_conv_quant_b1_add_quant) c_u_transfer_lo(stem_conv_quant_b1_add_quant)_ -1
     transfer(stem_conv_quant_b1_add_quant) c_u_transfer_hi(stem_conv_quant_b1_add_quant)_ -1
     transfer(stem_conv_quant_b1_conv1_quant) c_u_precedence(stem_conv_quant_b1_conv1_quant)_ 479.99999999999994
     transfer(stem_conv_quant_b1_conv1_quant) c_u_transfer_lo(stem_conv_quant_b1_conv1_quant)_ -1
     transfer(stem_conv_quant_b1_conv1_quant) c_u_transfer_hi(stem_conv_quant_b1_conv1_quant)_ -1
     order(b2_conv1_quant_b2_skip_quant) c_u_order_uv(b2_conv1_quant_b2_skip_quant)_ 88121.34765625
     order(b2_conv1_quant_b2_skip_quant) c_u_order_vu(b2_conv1_quant_b2_skip_quant)_ -88121.34765625
     order(b2_skip_quant_b2_conv2_quant) c_u_order_uv(b2_skip_quant_b2_conv2_quant)_ 88121.34765625
     order(b2_skip_quant_b2_conv2_quant) c_u_order_vu(b2_skip_quant_b2_conv2_quant)_ -88121.34765625
     order(b3a_conv_quant_b3b_conv_quant) c_u_order_uv(b3a_conv_quant_b3b_conv_quant)_ 88121.34765625
     order(b3a_conv_quant_b3b_conv_quant) c_u_order_vu(b3a_conv_quant_b3b_conv_quant)_ -88121.34765625
     order(b3a_conv_quant_b3b_dwconv_quant) c_u_order_uv(b3a_conv_quant_b3b_dwconv_quant)_ 88121.34765625
     order(b3a_conv_quant_b3b_dwconv_quant) c_u_order_vu(b3a_conv_quant_b3b_dwconv_quant)_ -88121.34765625
     makespan objective 1
     makespan c_u_makespan_bound(logits_DequantizeLinear)_ -1
     makespan c_u_host_serial_ -1
RHS
     RHS c_u_makespan_bound(logits_DequantizeLinear)_ 0
     RHS c_e_finish_time(b1_add_quant)_ 2549.9999999999995
     RHS c_e_finish_time(b1_conv1_quant)_ 11200
     RHS c_e_finish_time(b1_conv2_quant)_ 11200
     RHS c_e_finish_time(b2_add_quant)_ 1400
     RHS c_e_finish_time(b2_conv1_quant)_ 3200
     RHS c_e_finish_time(b2_conv2_quant)_ 2880
     RHS c_e_finish_time(b2_skip_quant)_ 3200
     RHS c_e_finish_time(b3_concat_quant)_ 1700
     RHS c_e_finish_time(b3a_conv_quant)_ 2800.0000000000005
     RHS c_e_finish_time(b3b_conv_quant)_ 2800.0000000000005
     RHS c_e_finish_time(b3b_dwconv_quant)_ 2880
     RHS c_e_finish_time(fc_quant)_ 10.722656250000002
     RHS c_e_finish_time(flatten)_ 600
     RHS c_e_finish_time(gap_quant)_ 1650
     RHS c_e_finish_time(input_QuantizeLinear)_ 999.99999999999989
     RHS c_e_finish_time(logits_DequantizeLinear)_ 800
     RHS c_e_finish_time(stem_conv_quant)_ 10750
     RHS c_u_precedence(b1_add_quant_b2_conv1_quant)_ 0
     RHS c_u_precedence(b1_add_quant_b2_skip_quant)_ 0
     RHS c_u_precedence(b1_conv1_quant_b1_conv2_quant)_ 0
     RHS c_u_precedence(b1_conv2_quant_b1_add_quant)_ 0
     RHS c_u_precedence(b2_add_quant_b3a_conv_quant)_ 0
     RHS c_u_precedence(b2_add_quant_b3b_dwconv_quant)_ 0
     RHS c_u_precedence(b2_conv1_quant_b2_conv2_quant)_ 0
     RHS c_u_precedence(b2_conv2_quant_b2_add_quant)_ 0
     RHS c_u_precedence(b2_skip_quant_b2_add_quant)_ 0
     RHS c_u_precedence(b3_concat_quant_gap_quant)_ 0
     RHS c_u_precedence(b3a_conv_quant_b3_concat_quant)_ 0
     RHS c_u_precedence(b3b_conv_quant_b3_concat_quant)_ 0
     RHS c_u_precedence(b3b_dwconv_quant_b3b_conv_quant)_ 0
     RHS c_u_precedence(fc_quant_logits_DequantizeLinear)_ 0
     RHS c_u_precedence(flatten_fc_quant)_ 0
     RHS c_u_precedence(gap_quant_flatten)_ 0
     RHS c_u_precedence(input_QuantizeLinear_stem_conv_quant)_ 0
     RHS c_u_precedence(stem_conv_quant_b1_add_quant)_ 0
     RHS c_u_precedence(stem_conv_quant_b1_conv1_quant)_ 0
     RHS c_u_transfer_lo(b1_add_quant_b2_conv1_quant)_ -1
     RHS c_u_transfer_lo(b1_add_quant_b2_skip_quant)_ -1
     RHS c_u_transfer_lo(b1_conv1_quant_b1_conv2_quant)_ 0
     RHS c_u_transfer_lo(b1_conv2_quant_b1_add_quant)_ 1
     RHS c_u_transfer_lo(b2_add_quant_b3a_conv_quant)_ -1
     RHS c_u_transfer_lo(b2_add_quant_b3b_dwconv_quant)_ -1
     RHS c_u_transfer_lo(b2_conv1_quant_b2_conv2_quant)_ 0
     RHS c_u_transfer_lo(b2_conv2_quant_b2_add_quant)_ 1
     RHS c_u_transfer_lo(b2_skip_quant_b2_add_quant)_ 1
     RHS c_u_transfer_lo(b3_concat_quant_gap_quant)_ 0
     RHS c_u_transfer_lo(b3a_conv_quant_b3_concat_quant)_ 1
     RHS c_u_transfer_lo(b3b_conv_quant_b3_concat_quant)_ 1
     RHS c_u_transfer_lo(b3b_dwconv_quant_b3b_conv_quant)_ 0
     RHS c_u_transfer_lo(fc_quant_logits_DequantizeLinear)_ 1
     RHS c_u_transfer_lo(flatten_fc_quant)_ -1
     RHS c_u_transfer_lo(gap_quant_flatten)_ 0
     RHS c_u_transfer_lo(input_QuantizeLinear_stem_conv_quant)_ -1
     RHS c_u_transfer_lo(stem_conv_quant_b1_add_quant)_ 1
     RHS c_u_transfer_lo(stem_conv_quant_b1_conv1_quant)_ 0
     RHS c_u_transfer_hi(b1_add_quant_b2_conv1_quant)_ 1
     RHS c_u_transfer_hi(b1_add_quant_b2_skip_quant)_ 1
     RHS c_u_transfer_hi(b1_conv1_quant_b1_conv2_quant)_ 0
     RHS c_u_transfer_hi(b1_conv2_quant_b1_add_quant)_ -1
     RHS c_u_transfer_hi(b2_add_quant_b3a_conv_quant)_ 1
     RHS c_u_transfer_hi(b2_add_quant_b3b_dwconv_quant)_ 1
     RHS c_u_transfer_hi(b2_conv1_quant_b2_conv2_quant)_ 0
     RHS c_u_transfer_hi(b2_conv2_quant_b2_add_quant)_ -1
     RHS c_u_transfer_hi(b2_skip_quant_b2_add_quant)_ -1
     RHS c_u_transfer_hi(b3_concat_quant_gap_quant)_ 0
     RHS c_u_transfer_hi(b3a_conv_quant_b3_concat_quant)_ -1
     RHS c_u_transfer_hi(b3b_conv_quant_b3_concat_quant)_ -1
     RHS c_u_transfer_hi(b3b_dwconv_quant_b3b_conv_quant)_ 0
     RHS c_u_transfer_hi(fc_quant_logits_DequantizeLinear)_ -1
     RHS c_u_transfer_hi(flatten_fc_quant)_ 1
     RHS c_u_transfer_hi(gap_quant_flatten)_ 0
     RHS c_u_transfer_hi(input_QuantizeLinear_stem_conv_quant)_ 1
     RHS c_u_transfer_hi(stem_conv_quant_b1_add_quant)_ -1
     RHS c_u_transfer_hi(stem_conv_quant_b1_conv1_quant)_ 0
     RHS c_u_order_uv(b2_conv1_quant_b2_skip_quant)_ 264364.04296875
     RHS c_u_order_uv(b2_skip_quant_b2_conv2_quant)_ 264364.04296875
     RHS c_u_order_uv(b3a_conv_quant_b3b_conv_quant)_ 264364.04296875
     RHS c_u_order_uv(b3a_conv_quant_b3b_dwconv_quant)_ 264364.04296875
     RHS c_u_order_vu(b2_conv1_quant_b2_skip_quant)_ 176242.6953125
     RHS c_u_order_vu(b2_skip_quant_b2_conv2_quant)_ 176242.6953125
     RHS c_u_order_vu(b3a_conv_quant_b3b_conv_quant)_ 176242.6953125
     RHS c_u_order_vu(b3a_conv_quant_b3b_dwconv_quant)_ 176242.6953125
     RHS c_u_budget_ 33
     RHS c_u_host_serial_ -9700
     RHS c_u_energetic_head(b2_add_quant)_ 0
     RHS c_u_energetic_head(b2_conv2_quant)_ 0
     RHS c_u_energetic_head(b3_concat_quant)_ 0
     RHS c_u_energetic_head(b3b_conv_quant)_ 0
     RHS c_u_energetic_tail(b1_add_quant)_ 0
     RHS c_u_energetic_tail(b2_add_quant)_ 0
     RHS c_u_energetic_tail(b2_conv1_quant)_ 0
     RHS c_u_energetic_tail(b3b_dwconv_quant)_ 0
     RHS c_u_bottleneck(b1_add_quant_b2_add_quant)_ 0
     RHS c_u_bottleneck(b1_conv1_quant_b1_conv2_quant)_ 0
     RHS c_u_bottleneck(b1_conv2_quant_b1_add_quant)_ 0
     RHS c_u_bottleneck(b2_add_quant_b3_concat_quant)_ 0
     RHS c_u_bottleneck(b3_concat_quant_gap_quant)_ 0
     RHS c_u_bottleneck(fc_quant_logits_DequantizeLinear)_ 0
     RHS c_u_bottleneck(flatten_fc_quant)_ 0
     RHS c_u_bottleneck(gap_quant_flatten)_ 0
     RHS c_u_bottleneck(input_QuantizeLinear_stem_conv_quant)_ 0
     RHS c_u_bottleneck(stem_conv_quant_b1_conv1_quant)_ 0
BOUNDS
 BV BOUND host(b1_conv1_quant)
 BV BOUND host(b1_conv2_quant)
 BV BOUND host(b2_conv1_quant)
 BV BOUND host(b2_conv2_quant)
 BV BOUND host(b2_skip_quant)
 BV BOUND host(b3a_conv_quant)
 BV BOUND host(b3b_conv_quant)
 BV BOUND host(b3b_dwconv_quant)
 BV BOUND host(fc_quant)
 BV BOUND host(stem_conv_quant)
 LO BOUND start(b1_add_quant) 0
 LO BOUND start(b1_conv1_quant) 0
 LO BOUND start(b1_conv2_quant) 0
 LO BOUND start(b2_add_quant) 0
 LO BOUND start(b2_conv1_quant) 0
 LO BOUND start(b2_conv2_quant) 0
 LO BOUND start(b2_skip_quant) 0
 LO BOUND start(b3_concat_quant) 0
 LO BOUND start(b3a_conv_quant) 0
 LO BOUND start(b3b_conv_quant) 0
 LO BOUND start(b3b_dwconv_quant) 0
 LO BOUND start(fc_quant) 0
 LO BOUND start(flatten) 0
 LO BOUND start(gap_quant) 0
 LO BOUND start(input_QuantizeLinear) 0
 LO BOUND start(logits_DequantizeLinear) 0
 LO BOUND start(stem_conv_quant) 0
 LO BOUND finish(b1_add_quant) 0
 LO BOUND finish(b1_conv1_quant) 0
 LO BOUND finish(b1_conv2_quant) 0
 LO BOUND finish(b2_add_quant) 0
 LO BOUND finish(b2_conv1_quant) 0
 LO BOUND finish(b2_conv2_quant) 0
 LO BOUND finish(b2_skip_quant) 0
 LO BOUND finish(b3_concat_quant) 0
 LO BOUND finish(b3a_conv_quant) 0
 LO BOUND finish(b3b_conv_quant) 0
 LO BOUND finish(b3b_dwconv_quant) 0
 LO BOUND finish(fc_quant) 0
 LO BOUND finish(flatten) 0
 LO BOUND finish(gap_quant) 0
 LO BOUND finish(input_QuantizeLinear) 0
 LO BOUND finish(logits_DequantizeLinear) 0
 LO BOUND finish(stem_conv_quant) 0
 BV BOUND transfer(b1_add_quant_b2_conv1_quant)
 BV BOUND transfer(b1_add_quant_b2_skip_quant)
 BV BOUND transfer(b1_conv1_quant_b1_conv2_quant)
 BV BOUND transfer(b1_conv2_quant_b1_add_quant)
 BV BOUND transfer(b2_add_quant_b3a_conv_quant)
 BV BOUND transfer(b2_add_quant_b3b_dwconv_quant)
 BV BOUND transfer(b2_conv1_quant_b2_conv2_quant)
 BV BOUND transfer(b2_conv2_quant_b2_add_quant)
 BV BOUND transfer(b2_skip_quant_b2_add_quant)
 BV BOUND transfer(b3_concat_quant_gap_quant)
 BV BOUND transfer(b3a_conv_quant_b3_concat_quant)
 BV BOUND transfer(b3b_conv_quant_b3_concat_quant)
 BV BOUND transfer(b3b_dwconv_quant_b3b_conv_quant)
 BV BOUND transfer(fc_quant_logits_DequantizeLinear)
 BV BOUND transfer(flatten_fc_quant)
 BV BOUND transfer(gap_quant_flatten)
 BV BOUND transfer(input_QuantizeLinear_stem_conv_quant)
 BV BOUND transfer(stem_conv_quant_b1_add_quant)
 BV BOUND transfer(stem_conv_quant_b1_conv1_quant)
 BV BOUND order(b2_conv1_quant_b2_skip_quant)
 BV BOUND order(b2_skip_quant_b2_conv2_quant)
 BV BOUND order(b3a_conv_quant_b3b_conv_quant)
 BV BOUND order(b3a_conv_quant_b3b_dwconv_quant)
 LO BOUND makespan 0
ENDATA
